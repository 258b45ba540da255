package filter

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/gorocketmq/gorocketmq/message"
)

// seedCases adds the expressions of the RocketMQ table as seeds.
func seedCases(f *testing.F, add func(src string, props []byte)) {
	file, err := os.Open(casesFile)
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for n := 0; sc.Scan() && n < 400; n++ {
		fields := strings.Split(sc.Text(), " ")
		src, _ := hex.DecodeString(fields[0])
		props, _ := hex.DecodeString(fields[1])
		add(string(src), props)
	}
}

var fuzzMessages = [][]byte{
	nil,
	[]byte("a\x015\x02b\x017\x02s\x01abc\x02TAGS\x01tagA"),
	[]byte("a\x01x\x02\x02\x01\x02a\x01\x02b\x011e3"),
}

// FuzzCompile: no text makes Compile or Match panic, and a compiled
// expression keeps its source.
func FuzzCompile(f *testing.F) {
	seedCases(f, func(src string, _ []byte) { f.Add(src) })
	f.Fuzz(func(t *testing.T, src string) {
		x, err := Compile(src)
		if err != nil {
			return
		}
		if x.String() != src {
			t.Fatalf("String() = %q, want %q", x.String(), src)
		}
		for _, m := range fuzzMessages {
			x.Match(m)
		}
	})
}

// FuzzMatch: evaluation never panics on any properties, and reading the
// raw encoding agrees with decoding it into a map first (skipped entries,
// repeated names, trailing separators).
func FuzzMatch(f *testing.F) {
	seedCases(f, func(src string, props []byte) { f.Add(src, props) })
	f.Fuzz(func(t *testing.T, src string, props []byte) {
		x, err := Compile(src)
		if err != nil {
			return
		}
		got := x.Match(props)
		canonical := message.MarshalProperties(message.UnmarshalProperties(props))
		if want := x.Match(canonical); got != want {
			t.Fatalf("%q over %q: %v, over the decoded map %q: %v", src, props, got, canonical, want)
		}
	})
}

// FuzzLookup: the search for one property in the raw encoding (which
// starts at the rarest byte of the name and skips values) finds exactly
// what message.PropertyValue finds by walking every entry.
func FuzzLookup(f *testing.F) {
	for _, m := range fuzzMessages {
		for _, name := range []string{"a", "b", "TAGS", "s", "zz"} {
			f.Add(name, m)
		}
	}
	f.Add("region", benchProps)
	f.Add("UNIQ_KEY", benchProps)
	f.Add("ab", []byte("xab\x011\x02ab\x01\x02ab\x01ab\x01ab\x02b\x012"))
	f.Fuzz(func(t *testing.T, name string, props []byte) {
		if name == "" || strings.ContainsAny(name, "\x01\x02") {
			return // not a property name
		}
		n := newNeedle(name)
		got, gotOK := lookup(props, &n)
		want, wantOK := message.PropertyValue(props, name)
		if gotOK != wantOK || string(got) != string(want) {
			t.Fatalf("%q in %q: %q %v, want %q %v", name, props, got, gotOK, want, wantOK)
		}
	})
}
