package message

import (
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnmarshalProperties(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"empty", "", map[string]string{}},
		{"one", "TAGS\x01a", map[string]string{"TAGS": "a"}},
		{"java style, no trailing separator", "TAGS\x01a\x02KEYS\x01k1 k2", map[string]string{"TAGS": "a", "KEYS": "k1 k2"}},
		{"go style, trailing separator", "TAGS\x01a\x02KEYS\x01k\x02", map[string]string{"TAGS": "a", "KEYS": "k"}},
		{"empty value dropped", "A\x01\x02B\x01b", map[string]string{"B": "b"}},
		{"empty name dropped", "\x01v\x02B\x01b", map[string]string{"B": "b"}},
		{"no separator dropped", "novalue\x02B\x01b", map[string]string{"B": "b"}},
		{"short chunks ignored", "\x02\x02\x01\x02B\x01b\x02\x02", map[string]string{"B": "b"}},
		{"value keeps later 0x01 (Java)", "A\x01x\x01y", map[string]string{"A": "x\x01y"}},
		{"last duplicate wins", "A\x011\x02A\x012", map[string]string{"A": "2"}},
		{"utf8", "K\x01värde", map[string]string{"K": "värde"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := UnmarshalProperties([]byte(tc.in))
			assert.Equal(t, tc.want, got)
			for k, v := range tc.want {
				pv, ok := PropertyValue([]byte(tc.in), k)
				assert.True(t, ok, k)
				assert.Equal(t, v, string(pv))
			}
			_, ok := PropertyValue([]byte(tc.in), "missing")
			assert.False(t, ok)
		})
	}
}

func TestMarshalPropertiesRoundTrip(t *testing.T) {
	cases := []map[string]string{
		nil,
		{},
		{"TAGS": "a"},
		{"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "ABC", "x": "y z"},
		{"skip": "", "": "skip", "keep": "v"},
	}
	for _, props := range cases {
		b := MarshalProperties(props)
		assert.Equal(t, PropertiesSize(props), len(b))
		if len(b) > 0 {
			assert.NotEqual(t, byte(PropertySeparator), b[len(b)-1], "no trailing separator, like Java")
		}
		want := map[string]string{}
		for k, v := range props {
			if k != "" && v != "" {
				want[k] = v
			}
		}
		assert.Equal(t, want, UnmarshalProperties(b))

		// The official client reads what we write, and we read what it writes.
		pm := primitive.NewMessage("t", nil)
		pm.UnmarshalProperties(b)
		assert.Equal(t, want, pm.GetProperties())
		pm2 := primitive.NewMessage("t", nil)
		pm2.WithProperties(want)
		assert.Equal(t, want, UnmarshalProperties([]byte(pm2.MarshallProperties())))
	}
}

func TestMessageAccessors(t *testing.T) {
	var m Message
	assert.Equal(t, "", m.Tags())
	m.SetProperty(PropTags, "t")
	m.SetProperty(PropKeys, "a b")
	m.SetProperty(PropUniqKey, "U")
	m.SetProperty(PropDelayTimeLevel, "3")
	assert.Equal(t, "t", m.Tags())
	assert.Equal(t, "a b", m.Keys())
	assert.Equal(t, "U", m.UniqKey())
	assert.Equal(t, 3, m.DelayTimeLevel())
	m.SetProperty(PropDelayTimeLevel, "x")
	assert.Equal(t, 0, m.DelayTimeLevel())
	m.RemoveProperty(PropTags)
	require.NotContains(t, m.Properties, PropTags)
}

// FuzzParseProperties checks the map decoder against PropertyValue, a
// separate scanner with the same rules, on any input: every name the map
// holds is found there with the same value.
func FuzzParseProperties(f *testing.F) {
	f.Add("UNIQ_KEY\x01C0A8\x02TAGS\x01a\x02")
	f.Add("\x01\x02\x01x\x02k\x01\x01v")
	f.Add("a\x01b\x02a\x01c")
	f.Fuzz(func(t *testing.T, s string) {
		for k, v := range ParseProperties(s) {
			got, ok := PropertyValue([]byte(s), k)
			if !ok || string(got) != v {
				t.Fatalf("%q: map has %q=%q, PropertyValue gives %q (found %v)", s, k, v, got, ok)
			}
		}
	})
}
