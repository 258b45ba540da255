package filter

import (
	"testing"

	"github.com/gorocketmq/gorocketmq/message"
)

// benchProps is a typical message's properties: what a Go or Java producer
// sends plus the broker's CLUSTER and two user properties.
var benchProps = message.MarshalProperties(map[string]string{
	message.PropUniqKey: "7F0000010F6B18B4AAC27D8A5B8E0000", message.PropCluster: "DefaultCluster",
	message.PropWaitStoreMsgOK: "true", message.PropTags: "tagA", message.PropKeys: "order-42",
	"region": "eu-west", "amount": "317", "score": "0.73",
})

// BenchmarkMatch measures evaluation per message; it must not allocate.
func BenchmarkMatch(b *testing.B) {
	for _, bc := range []struct{ name, expr string }{
		{"number", "amount > 100"},
		{"string", "region = 'eu-west'"},
		{"in", "region IN ('us-east', 'us-west', 'eu-west', 'ap-south', 'sa-east')"},
		{"between", "amount BETWEEN 100 AND 500"},
		{"null", "vip IS NULL"},
		{"compound", "(amount > 100 AND score >= 0.5) OR TAGS IN ('tagB', 'tagC') AND region STARTSWITH 'eu'"},
		{"nomatch", "amount > 1000 AND region = 'us-east'"},
	} {
		x := MustCompile(bc.expr)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				x.Match(benchProps)
			}
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile("(amount > 100 AND score >= 0.5) OR TAGS IN ('tagB', 'tagC') AND region STARTSWITH 'eu'"); err != nil {
			b.Fatal(err)
		}
	}
}
