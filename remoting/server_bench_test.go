package remoting

import (
	"bufio"
	"testing"
	"time"
)

// BenchmarkInlinePullAnswers is a catch-up consumer's traffic: eight pull
// requests arrive together and each is answered on the event loop with 32
// records of 1.1 KiB written into the frame record by record, as the
// broker's pull processor does. One op is the eight answers; B/op is mostly
// the server's write buffer growing.
func BenchmarkInlinePullAnswers(b *testing.B) {
	const code RequestCode = 9201
	const pulls, records, recordSize = 8, 32, 1100
	record := make([]byte, recordSize)
	s := startInlineAnswers(b, code, records*recordSize, func(_ *Command, dst []byte) []byte {
		for range records {
			dst = append(dst, record...)
		}
		return dst
	})
	conn := rawConn(b, s.Addr())
	var batch []byte
	for i := range pulls {
		var err error
		if batch, err = AppendFrame(batch, &Command{Code: int32(code), Opaque: int32(i + 1)}); err != nil {
			b.Fatal(err)
		}
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	b.SetBytes(pulls * records * recordSize)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := conn.Write(batch); err != nil {
			b.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		for range pulls {
			if _, err := ReadCommand(r); err != nil {
				b.Fatal(err)
			}
		}
	}
}
