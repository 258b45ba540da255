package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
)

// A power cut can leave a record whose properties lost a sector (zeros read
// back) while its header and body check out. After a crash, recovery takes
// such a record in the unflushed tail for a torn write and cuts the log
// before it: it is never served. A clean exit makes no such check.
func TestRecoveryRejectsTornProperties(t *testing.T) {
	for _, crashed := range []bool{true, false} {
		name := "clean"
		if crashed {
			name = "crash"
		}
		t.Run(name, func(t *testing.T) {
			cfg, sent := damageStore(t, crashed)
			last := sent[len(sent)-1]
			path := filepath.Join(cfg.StorePathRootDir, "commitlog", fileName(last.phy-last.phy%int64(cfg.MappedFileSizeCommitLog)))
			pos := last.phy % int64(cfg.MappedFileSizeCommitLog)
			rec := make([]byte, last.size)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			defer f.Close()
			_, err = f.ReadAt(rec, pos)
			require.NoError(t, err)
			r, err := message.ParseRecord(rec)
			require.NoError(t, err)
			// Zero the tail of the properties (the key's value), as a lost
			// sector reads back.
			propsEnd := int64(len(rec))
			_, err = f.WriteAt(make([]byte, 4), pos+propsEnd-4)
			require.NoError(t, err)
			require.NoError(t, r.VerifyCRC(), "the body CRC does not see it")

			s, hook := openLogged(t, cfg)
			if !crashed {
				// Nothing was torn by a clean exit: the record is served as
				// the disk holds it (this damage is not a power cut's).
				assert.Equal(t, last.phy+int64(last.size), s.CommitLog().MaxOffset())
				return
			}
			assert.Equal(t, last.phy, s.CommitLog().MaxOffset(), "the log ends before the torn record")
			assert.NotEmpty(t, logged(hook, "truncates the log"), "the cut is logged")
			assertServed(t, s, sent[:len(sent)-1], nil)
			next := mustPut(t, s, newTestMessage(damageTopic, last.queueID, body(1, 10), "", ""))
			assert.Equal(t, last.qoff, next.QueueOffset, "the torn message's offset is taken by the next put")
		})
	}
}
