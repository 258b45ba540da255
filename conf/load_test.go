package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestLoadProperties(t *testing.T) {
	log, hook := test.NewNullLogger()
	p := writeFile(t, "namesrv.conf", `# comment
! another comment
listenPort = 9999
kvConfigPath=/tmp/kv\
 Config.json
ORDERMESSAGEENABLE:true
mapedFileSizeCommitLog=1073741824
productEnvName  test
`)
	cfg := DefaultNamesrvConfig()
	require.NoError(t, Load(p, &cfg, log))
	assert.Equal(t, 9999, cfg.ListenPort)
	assert.Equal(t, "/tmp/kvConfig.json", cfg.KvConfigPath)
	assert.True(t, cfg.OrderMessageEnable, "keys match case-insensitively")
	assert.Equal(t, "test", cfg.ProductEnvName)
	assert.Equal(t, 8, cfg.ServerWorkerThreads, "untouched keys keep their defaults")

	var warned []string
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warned = append(warned, e.Data["key"].(string))
		}
	}
	assert.Equal(t, []string{"mapedfilesizecommitlog"}, warned)
}

func TestLoadYAML(t *testing.T) {
	log, hook := test.NewNullLogger()
	p := writeFile(t, "namesrv.yaml", "listenPort: 10001\norderMessageEnable: true\nscanNotActiveBrokerInterval: 500\nnested:\n  key: 1\n")
	cfg := DefaultNamesrvConfig()
	require.NoError(t, Load(p, &cfg, log))
	assert.Equal(t, 10001, cfg.ListenPort)
	assert.True(t, cfg.OrderMessageEnable)
	assert.Equal(t, int64(500), cfg.ScanNotActiveBrokerInterval)
	require.Len(t, hook.AllEntries(), 1)
	assert.Equal(t, "nested.key", hook.LastEntry().Data["key"])
}

func TestLoadErrorsNameKeyAndValue(t *testing.T) {
	tests := []struct {
		name, file, content string
		wantInErr           []string
	}{
		{"not an int", "a.conf", "listenPort=abc\n", []string{"listenPort", `"abc"`}},
		{"not a bool", "a.conf", "orderMessageEnable=yes please\n", []string{"orderMessageEnable", "yes please"}},
		{"out of range", "a.conf", "listenPort=70000\n", []string{"listenPort", "70000"}},
		{"validation", "a.conf", "serverWorkerThreads=0\n", []string{"serverWorkerThreads", "0"}},
		{"yaml type", "a.yml", "listenPort: [1, 2]\n", []string{"listenPort"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, _ := test.NewNullLogger()
			cfg := DefaultNamesrvConfig()
			err := Load(writeFile(t, tt.file, tt.content), &cfg, log)
			require.ErrorIs(t, err, ErrBadValue)
			for _, s := range tt.wantInErr {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	cfg := DefaultNamesrvConfig()
	err := Load(filepath.Join(t.TempDir(), "nope.conf"), &cfg, nil)
	assert.ErrorIs(t, err, ErrRead)
	err = Load(writeFile(t, "bad.yaml", "a: [\n"), &cfg, nil)
	assert.ErrorIs(t, err, ErrRead)
}

func TestLoadNamesrvConfigSample(t *testing.T) {
	log, hook := test.NewNullLogger()
	cfg, err := LoadNamesrvConfig("namesrv.conf", log)
	require.NoError(t, err)
	assert.Empty(t, hook.AllEntries(), "the sample holds only known keys")
	assert.Equal(t, 9876, cfg.ListenPort)
	assert.Equal(t, "data/namesrv/kvConfig.json", cfg.KvConfigPath)

	def, err := LoadNamesrvConfig("", log)
	require.NoError(t, err)
	assert.Equal(t, DefaultNamesrvConfig(), def)
}

func TestDefaultNamesrvConfig(t *testing.T) {
	c := DefaultNamesrvConfig()
	require.NoError(t, c.Validate())
	assert.Equal(t, 9876, c.ListenPort)
	assert.Equal(t, "0.0.0.0:9876", c.ListenAddr())
	assert.Equal(t, "10s", c.ScanInterval().String())
	assert.Equal(t, "2m0s", c.BrokerExpiry().String())
	assert.Equal(t, "kvConfig.json", filepath.Base(c.KvConfigPath))
}

func TestSetGetFormat(t *testing.T) {
	c := DefaultNamesrvConfig()
	require.NoError(t, Set(&c, "listenport", " 1234 "))
	assert.Equal(t, 1234, c.ListenPort)
	v, ok := Get(&c, "LISTENPORT")
	assert.True(t, ok)
	assert.Equal(t, "1234", v)
	_, ok = Get(&c, "nope")
	assert.False(t, ok)
	assert.ErrorIs(t, Set(&c, "nope", "1"), ErrUnknownKey)
	assert.ErrorIs(t, Set(&c, "brokerChannelExpiredTime", "1.5"), ErrBadValue)
	name, ok := CanonicalKey(&c, "kvconfigpath")
	assert.True(t, ok)
	assert.Equal(t, "kvConfigPath", name)

	c.ProductEnvName = "a\nb"
	out := Format(&c)
	assert.Contains(t, out, "listenPort=1234\n")
	assert.Contains(t, out, "productEnvName=a\\nb\n")
	assert.Equal(t, Keys(&c)[0], "rocketmqHome")

	// Format's output loads back into the same config.
	back := NamesrvConfig{}
	props, err := ParseProperties(out)
	require.NoError(t, err)
	for k, v := range props {
		require.NoError(t, Set(&back, k, v))
	}
	assert.Equal(t, c, back)

	assert.Error(t, Set(c, "listenPort", "1"), "a non-pointer is refused")
	assert.Nil(t, Keys(42))
}

func TestParseProperties(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"separators", "a=1\nb:2\nc 3\nd = 4 \n", map[string]string{"a": "1", "b": "2", "c": "3", "d": "4 "}},
		{"comments and blanks", "# x=1\n\n  ! y=2\n\tz=3\r\n", map[string]string{"z": "3"}},
		{"escapes", `k\=ey=v\tal\u0041\\`, map[string]string{"k=ey": "v\talA\\"}},
		{"continuation", "a=one\\\n   two\\\n three", map[string]string{"a": "onetwothree"}},
		{"escaped backslash is not continuation", "a=x\\\\\nb=y", map[string]string{"a": `x\`, "b": "y"}},
		{"empty value", "a=\nb", map[string]string{"a": "", "b": ""}},
		{"last wins", "a=1\na=2", map[string]string{"a": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProperties(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := ParseProperties(`a=\u12`)
	assert.Error(t, err)
	_, err = ParseProperties(`a=\uzzzz`)
	assert.Error(t, err)
}

func FuzzParseProperties(f *testing.F) {
	f.Add("a=1\nb:2\\\n c\n#x\n")
	f.Add(`k\u0041=\\v`)
	f.Fuzz(func(t *testing.T, s string) {
		props, err := ParseProperties(s)
		if err != nil {
			return
		}
		for k, v := range props {
			// Whatever parsed must survive a Format-style round trip.
			line := escapeKeyForTest(k) + "=" + escapePropertyValue(v)
			back, err := ParseProperties(line)
			if err != nil || back[unescapeMust(t, escapeKeyForTest(k))] != v {
				t.Fatalf("round trip of %q=%q: %v %q", k, v, err, back)
			}
		}
	})
}

func escapeKeyForTest(k string) string {
	out := []rune{}
	for _, r := range k {
		switch r {
		case '=', ':', ' ', '\t', '\f', '\\', '#', '!':
			out = append(out, '\\', r)
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		default:
			out = append(out, r)
		}
	}
	return string(out)
}

func unescapeMust(t *testing.T, s string) string {
	u, err := unescapeProperty(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestParsePropertiesLongContinuationIsLinear: UPDATE_NAMESRV_CONFIG hands
// a client's body to ParseProperties. Continued lines were joined by
// re-concatenating the whole joined line each time, so a 480 KB body of
// continuations took about 12 s of CPU (a few MB: minutes per request).
func TestParsePropertiesLongContinuationIsLinear(t *testing.T) {
	const n = 200_000
	in := "k=" + strings.Repeat("a\\\n", n) + "end"
	start := time.Now()
	got, err := ParseProperties(in)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("a", n)+"end", got["k"])
	assert.Less(t, time.Since(start), 3*time.Second, "parsing must not be quadratic in the number of continued lines")
}
