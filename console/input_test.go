package console

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSendRefusesSeparatorsInTagAndKeys: a tag or key holding RocketMQ's
// property separators (\x01 between name and value, \x02 between
// properties) would be spliced into the message's properties as other
// properties (a delay level, a transaction flag): it is refused as bad
// input before anything is sent.
func TestSendRefusesSeparatorsInTagAndKeys(t *testing.T) {
	c, hs := mustConsole(t, "127.0.0.1:1", false)
	for _, f := range []url.Values{
		{"tag": {"t\x02DELAY\x013"}},
		{"keys": {"k\x02TRAN_MSG\x01true"}},
		{"tag": {"t\x01x"}},
	} {
		f.Set("token", c.token)
		f.Set("topic", "T")
		f.Set("body", "b")
		resp, body := post(t, hs, "/topic/send", f)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	}
}
