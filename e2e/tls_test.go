package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/internal/testcert"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// startTLSCluster starts a nameserver and a broker whose ports serve TLS in
// mode (tls.server.mode), with a certificate of a CA made for the test. The
// broker registers over TLS (tls.enable, verifying the nameserver against
// the CA), and the test's own client dials TLS too.
func startTLSCluster(t *testing.T, mode string) *Cluster {
	t.Helper()
	ca := testcert.NewCA(t, "e2e")
	srv := ca.Loopback(t, "server")
	set := func(c *conf.TLSConfig) {
		c.TLSServerMode = mode
		c.TLSServerCertPath, c.TLSServerKeyPath = srv.CertPath, srv.KeyPath
		c.TLSEnable = true
		c.TLSClientTrustCertPath = ca.CertPath
	}
	raw, err := remoting.ClientTLSConfig(remoting.ClientTLSOptions{TrustCertPath: ca.CertPath})
	require.NoError(t, err)
	return MustStartCluster(t,
		WithNamesrvConfig(func(c *conf.NamesrvConfig) { set(&c.TLSConfig) }),
		WithBrokerConfig(func(c *conf.BrokerConfig) { set(&c.TLSConfig) }),
		WithRawClientTLS(raw))
}

// storedCount is the number of messages topic holds over its queues.
func (c *Cluster) storedCount(t *testing.T, topic string) int64 {
	t.Helper()
	var n int64
	for q := range 4 {
		n += c.MaxOffset(t, topic, q)
	}
	return n
}

// logged reports whether the servers logged a line containing msg.
func (c *Cluster) logged(msg string) bool {
	for _, e := range c.Logs.AllEntries() {
		if strings.Contains(e.Message, msg) {
			return true
		}
	}
	return false
}

// The official Go client with WithTls(true) sends and consumes through a
// nameserver and a broker that serve TLS only; plain clients are refused
// before anything of theirs is read, with a line in the log.
func TestOfficialClientTLSEnforcing(t *testing.T) {
	c := startTLSCluster(t, "enforcing")
	d := c.StartDriver(t)
	topic := uniq("TLSEnforcing")
	p := d.NewProducerSpec(t, ProducerSpec{TLS: true})
	want := bodies("tls", 20)
	for _, r := range p.SendBodies(t, topic, "", want) {
		assert.Equal(t, topic, r.Topic)
	}
	in := NewInbox()
	d.StartPush(t, PushSpec{Group: uniq("CG"), Topic: topic, TLS: true}, in)
	WaitAll(t, want, in)
	require.EqualValues(t, len(want), c.storedCount(t, topic))

	// The official client without TLS: refused at the nameserver. It runs
	// in a driver of its own: the official client's WithTls(true) sets a
	// process-wide default, which every later client of the process shares.
	plain := c.StartDriver(t).NewProducerSpec(t, ProducerSpec{})
	_, err := plain.TrySendSync(t, Msg(topic, "plain"))
	require.Error(t, err, "a plain client must not get through an enforcing port")
	require.Eventually(t, func() bool { return c.logged("this port only serves TLS") }, opTimeout, pollEvery)

	// A plain send straight to the broker: the connection is dropped and
	// nothing is stored.
	cl := remoting.NewClient(remoting.ClientConfig{})
	t.Cleanup(func() { _ = cl.Close() })
	hdr := protocol.EncodeHeader(&protocol.SendMessageRequestHeader{ProducerGroup: "PG", Topic: topic, DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 4, QueueID: 0, BornTimestamp: time.Now().UnixMilli()}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err = cl.InvokeSync(ctx, c.BrokerAddr, remoting.NewRequest(remoting.SendMessage, hdr, []byte("plain")))
	require.Error(t, err)
	assert.EqualValues(t, len(want), c.storedCount(t, topic), "the plain send stored nothing")
	assert.Equal(t, len(want), in.Len(), "and delivered nothing")
}

// In permissive mode one port serves both: a TLS and a plain official
// producer send to the same topic, and a TLS and a plain consumer group each
// receive everything. The TLS and the plain clients run in drivers of their
// own (see TestOfficialClientTLSEnforcing).
func TestOfficialClientTLSPermissive(t *testing.T) {
	c := startTLSCluster(t, "permissive")
	tlsD, plainD := c.StartDriver(t), c.StartDriver(t)
	topic := uniq("TLSPermissive")
	overTLS := bodies("tls", 10)
	overPlain := bodies("plain", 10)
	tlsD.NewProducerSpec(t, ProducerSpec{TLS: true}).SendBodies(t, topic, "", overTLS)
	plainD.NewProducerSpec(t, ProducerSpec{}).SendBodies(t, topic, "", overPlain)
	want := append(append([]string{}, overTLS...), overPlain...)
	tlsIn, plainIn := NewInbox(), NewInbox()
	tlsD.StartPush(t, PushSpec{Group: uniq("CGTLS"), Topic: topic, TLS: true}, tlsIn)
	plainD.StartPush(t, PushSpec{Group: uniq("CGPlain"), Topic: topic}, plainIn)
	WaitAll(t, want, tlsIn, plainIn)
	assert.EqualValues(t, len(want), c.storedCount(t, topic))
}
