package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/internal/testfs"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// TestDiskFullBrokerSurvives fills the broker's real file system (a tmpfs)
// under concurrent sync sends: the broker process must survive (a write into
// an unbacked mapped page used to kill it with SIGBUS), refuse sends with
// SERVICE_NOT_AVAILABLE (14) and a remark that says the disk is full, serve
// every acknowledged message, take sends again once space is freed, and
// start again, read-only, on a disk that is still full.
func TestDiskFullBrokerSurvives(t *testing.T) {
	t.Parallel()
	root := testfs.MustMountTmpfs(t, 64<<20)
	// The layout: 8 MiB commitlog files, and so little room that the
	// next preallocated commitlog file leaves about 2 MiB for consume-queue
	// and index entries (20 keys a message), which used to be written into
	// sparse mapped files: the broker died with SIGBUS there.
	c := startBinCluster(t, map[string]string{
		"storePathRootDir":        filepath.Join(root, "store"),
		"mappedFileSizeCommitLog": strconv.Itoa(8 << 20),
		// The default 10 s between space checks: the disk fills between two
		// of them, so only the allocations can tell.
		"cleanResourceInterval": "10000",
		// Keep every message: above the force-clean ratio RocketMQ would
		// delete unexpired files, and this test counts acknowledged messages.
		"cleanFileForciblyEnable": "false",
		"maxIndexNum":             "400000", // an 8 MB index file: reserved as it fills
	})
	topic := uniq("DiskFull")
	const queues = 4
	c.createTopic(topic, queues)
	ballast := testfs.Fill(t, root, 10<<20)

	log := newAckLog()
	var mu sync.Mutex
	refusals := map[string]int{} // remark -> count
	var wg sync.WaitGroup
	for s := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refused := 0
			for i := 0; i < 20000 && refused < 50; i++ {
				id := fmt.Sprintf("f%d-%05d", s, i)
				keys := map[string]string{message.PropKeys: strings.TrimSpace(strings.Repeat(id+"-k ", 20))}
				r, err := c.send(topic, int32(i%queues), id, crashBody(id), keys)
				var code int32
				var remark string
				switch {
				case err == nil:
					log.ok(id, r)
					continue
				case errors.Is(err, errNotOK):
					code, remark = parseNotOK(err)
				default:
					t.Errorf("send %s: %v (the broker must answer, not drop the connection)", id, err)
					return
				}
				if code != int32(remoting.ServiceNotAvailable) {
					t.Errorf("send %s: code %d (%s), want SERVICE_NOT_AVAILABLE (14)", id, code, remark)
					return
				}
				refused++
				mu.Lock()
				refusals[remark]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.True(t, c.broker.running(), "the broker died on a full disk:\n%s", tailLines(c.broker.log(), 30))
	require.NotEmpty(t, refusals, "the disk never filled")
	for remark := range refusals {
		assert.Contains(t, remark, "disk full", "the refusal must say why")
	}
	t.Logf("%d sends acknowledged before the disk filled; refusals: %v", len(log.acked), refusals)
	requireAllServed(t, c, topic, queues, log)

	// Space freed: sends are taken again (the clean loop notices within its interval).
	require.NoError(t, os.Remove(ballast))
	require.Eventually(t, func() bool {
		r, err := c.send(topic, 0, "after-free", crashBody("after-free"), nil)
		if err == nil {
			log.ok("after-free", r)
		}
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "sends are refused after space was freed")
	requireAllServed(t, c, topic, queues, log)

	// A restart on a full disk: the broker starts, serves reads, refuses writes.
	testfs.Fill(t, root, 0)
	c.killBroker()
	testfs.Fill(t, root, 0) // what the kill freed
	c.startBroker()
	requireAllServed(t, c, topic, queues, log)
	_, err := c.send(topic, 1, "on-full-disk", crashBody("on-full-disk"), nil)
	require.ErrorIs(t, err, errNotOK)
	code, remark := parseNotOK(err)
	assert.Equal(t, int32(remoting.ServiceNotAvailable), code, remark)
}

// parseNotOK takes the code and remark out of an errNotOK error of send.
func parseNotOK(err error) (int32, string) {
	s := err.Error()
	i := strings.Index(s, "code ")
	if i < 0 {
		return -1, s
	}
	var code int32
	if _, err := fmt.Sscanf(s[i:], "code %d", &code); err != nil {
		return -1, s
	}
	rest := strings.TrimPrefix(s[i:], fmt.Sprintf("code %d", code))
	return code, strings.TrimSpace(rest)
}

// requireAllServed checks every acknowledged message of log is served at
// the queue and offset of its acknowledgement, with its body.
func requireAllServed(t *testing.T, c *binCluster, topic string, queues int32, log *ackLog) {
	t.Helper()
	served := map[string]protocol.SendMessageResponseHeader{}
	for q := range queues {
		for _, m := range c.pullAll(topic, q) {
			require.Equal(t, crashBody(m.UniqKey()), m.Body, "message %s", m.UniqKey())
			served[m.UniqKey()] = protocol.SendMessageResponseHeader{QueueID: m.QueueID, QueueOffset: m.QueueOffset}
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for id, r := range log.acked {
		got, ok := served[id]
		require.True(t, ok, "acknowledged message %s is not served", id)
		require.Equal(t, r.QueueID, got.QueueID, "message %s", id)
		require.Equal(t, r.QueueOffset, got.QueueOffset, "message %s", id)
	}
}
