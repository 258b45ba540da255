package broker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// TestBrokerMetadataFilesFallBackToBackup damages each metadata file of a
// broker that ran twice (so each has a .bak holding the same state): with
// the .bak intact the broker starts from it, warns naming both files and
// keeps its state; with both damaged it refuses to start, naming both.
func TestBrokerMetadataFilesFallBackToBackup(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5NoCheckConfig(t)
	root := cfg.StorePathRootDir

	// Run 1 makes state in every file; run 2 writes each file again.
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "metaT", 2)
	b.consume.offsets.Commit("cg", "metaT", 1, 42)
	g := protocol.NewSubscriptionGroupConfig("cg")
	g.RetryMaxTimes = 5
	require.NoError(t, b.consume.groups.Update(g))
	resp := t5Send(t, cl, b, "metaT", 0, "late", map[string]string{message.PropDelayTimeLevel: "1"})
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	t5WaitArrival(t, b, "metaT", 0, 1, 10*time.Second)
	require.Eventually(t, func() bool { return b.schedule.Offset(1) == 1 }, 5*time.Second, 10*time.Millisecond)
	h := t5SendHalf(t, cl, b, "pg", "metaT", "half", nil)
	t5SendHalf(t, cl, b, "pg", "metaT", "pending", nil)
	require.Equal(t, int32(remoting.Success), t5End(t, cl, b, "pg", h, message.TransactionCommitType).Code)
	mustShutdownBroker(t, b)
	b = MustStartBroker(t, cfg)
	mustShutdownBroker(t, b)
	timerCheck := filepath.Join(root, timerDirName, "timercheck")

	cfgDir := filepath.Join(root, "config")
	files := []struct {
		path  string
		bak   string // given to the backup when set
		check func(t *testing.T, b *Broker)
	}{
		{filepath.Join(cfgDir, "topics.json"), "", func(t *testing.T, b *Broker) {
			tc := b.topics.Get("metaT")
			require.NotNil(t, tc)
			assert.EqualValues(t, 2, tc.ReadQueueNums)
		}},
		{filepath.Join(cfgDir, "consumerOffset.json"), "", func(t *testing.T, b *Broker) {
			assert.EqualValues(t, 42, b.consume.offsets.Query("cg", "metaT", 1))
		}},
		{filepath.Join(cfgDir, "subscriptionGroup.json"), "", func(t *testing.T, b *Broker) {
			g := b.consume.groups.Get("cg")
			require.NotNil(t, g)
			assert.EqualValues(t, 5, g.RetryMaxTimes)
		}},
		{filepath.Join(cfgDir, delayOffsetFile), "", func(t *testing.T, b *Broker) {
			assert.EqualValues(t, 1, b.schedule.Offset(1), "the delivered message is not delivered again")
		}},
		{filepath.Join(cfgDir, transactionStateFile), "", func(t *testing.T, b *Broker) {
			assert.EqualValues(t, 1, b.trans.pending())
		}},
		// The timer has no traffic here: its backup gets an offset of its
		// own to show where the wheel started from.
		{timerCheck, `{"enqueueOffset":7}`, func(t *testing.T, b *Broker) {
			mustShutdownBroker(t, b) // the wheel is its loop's alone: read what it wrote
			var c struct {
				EnqueueOffset int64 `json:"enqueueOffset"`
			}
			data, err := os.ReadFile(timerCheck)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &c))
			assert.EqualValues(t, 7, c.EnqueueOffset)
		}},
	}
	garbage := []byte(`{"garbage":`)
	for _, f := range files {
		t.Run(filepath.Base(f.path), func(t *testing.T) {
			bak := f.path + fsutil.BackupSuffix
			if f.bak != "" {
				require.NoError(t, os.WriteFile(bak, []byte(f.bak), 0o644))
			}
			good, err := os.ReadFile(f.path)
			require.NoError(t, err)
			goodBak, err := os.ReadFile(bak)
			require.NoError(t, err, "every file has a backup after two runs")

			// The file is damaged: the backup loads, with a warning.
			require.NoError(t, os.WriteFile(f.path, garbage, 0o644))
			log, hook := test.NewNullLogger()
			b, err := New(cfg, log)
			require.NoError(t, err)
			require.NoError(t, b.Start())
			var warned bool
			for _, e := range hook.AllEntries() {
				if e.Level == logrus.WarnLevel && e.Data["file"] == f.path {
					warned = true
					assert.Equal(t, bak, e.Data["backup"])
				}
			}
			assert.True(t, warned, "a warning names the file and its backup")
			f.check(t, b)
			mustShutdownBroker(t, b)
			aside, err := filepath.Glob(f.path + ".corrupt-*")
			require.NoError(t, err)
			require.Len(t, aside, 1, "the damaged file is kept aside")
			require.NoError(t, os.Remove(aside[0]))

			// Both are damaged: the broker refuses to start, naming both.
			require.NoError(t, os.WriteFile(f.path, garbage, 0o644))
			require.NoError(t, os.WriteFile(bak, garbage, 0o644))
			b, err = New(cfg, baLogger())
			require.NoError(t, err)
			err = b.Start()
			require.ErrorIs(t, err, fsutil.ErrNoValidCopy)
			assert.Contains(t, err.Error(), f.path+": ")
			assert.Contains(t, err.Error(), bak+": ")
			mustShutdownBroker(t, b)
			assert.Equal(t, garbage, mustRead(t, f.path), "a failed start writes nothing")
			assert.Equal(t, garbage, mustRead(t, bak))

			require.NoError(t, os.WriteFile(f.path, good, 0o644))
			require.NoError(t, os.WriteFile(bak, goodBak, 0o644))
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

// TestTransactionStateBeyondQueuesCorrected: a transactionState.json whose
// offsets lie beyond the half and op queues (a damaged number, or queues
// that lost their tail) is brought back to the queues' ends, so a new half
// message is pending, not taken for resolved.
func TestTransactionStateBeyondQueuesCorrected(t *testing.T) {
	baVerifyNoLeaks(t)
	cfg := t5NoCheckConfig(t)
	dir := filepath.Join(cfg.StorePathRootDir, "config")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, transactionStateFile),
		[]byte(`{"halfOffset":1000,"opOffset":1000,"resolved":{"1000":1}}`), 0o644))
	b, cl := t5Start(t, cfg)
	bcCreateTopic(t, b, "txC", 1)
	h := t5SendHalf(t, cl, b, "pg", "txC", "a", nil)
	assert.Zero(t, h.queueOffset)
	assert.EqualValues(t, 1, b.trans.pending(), "the new half message waits for its decision")
	require.Equal(t, int32(remoting.Success), t5End(t, cl, b, "pg", h, message.TransactionCommitType).Code)
	t5WaitArrival(t, b, "txC", 0, 1, 5*time.Second)
}
