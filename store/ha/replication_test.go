package ha

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/store"
)

func TestReplicationByteIdenticalAcrossFiles(t *testing.T) {
	mst := openStore(t, t.TempDir())
	m := startMaster(t, mst, haConfig(), nil)
	sst := openStore(t, t.TempDir())
	sl := startSlave(t, sst, haConfig(), nil, m.Addr().String())
	require.Eventually(t, func() bool { return len(m.Status().Slaves) == 1 }, waitFor, time.Millisecond)
	// Written while the slave follows: pushed as they arrive, over several
	// files.
	end := putN(t, mst, 0, 1200, 2000)
	require.Greater(t, end, 3*int64(mst.CommitLog().FileSize()))
	waitOffset(t, sst, end)
	assertSameCommitLog(t, mst, sst)
	assertSameQueues(t, mst, sst)
	assert.Equal(t, int64(0), sst.CommitLog().MinOffset(), "a slave connected to an empty master starts at 0")
	require.Eventually(t, func() bool {
		s := m.Status()
		return len(s.Slaves) == 1 && s.Slaves[0].AckOffset == end && s.Push2SlaveMaxOffset == end
	}, waitFor, time.Millisecond)
	st := sl.Status()
	assert.Equal(t, SlaveFollowing, st.State)
	assert.Equal(t, m.Addr().String(), st.MasterAddr)
	assert.False(t, st.Compressed)
}

func TestReplicationNewSlaveStartsAtNewestFile(t *testing.T) {
	mst := openStore(t, t.TempDir())
	end := putN(t, mst, 0, 900, 2000)
	m := startMaster(t, mst, haConfig(), nil)
	sst := openStore(t, t.TempDir())
	startSlave(t, sst, haConfig(), nil, m.Addr().String())
	waitOffset(t, sst, end)
	fs := int64(mst.CommitLog().FileSize())
	assert.Equal(t, end-end%fs, sst.CommitLog().MinOffset())
	end = putN(t, mst, 900, 600, 2000)
	waitOffset(t, sst, end)
	assertSameCommitLog(t, mst, sst)
	assertSameQueues(t, mst, sst)
}

func TestReplicationSeveralSlaves(t *testing.T) {
	mst := openStore(t, t.TempDir())
	m := startMaster(t, mst, haConfig(), nil)
	var slaves []*store.Store
	for range 3 {
		sst := openStore(t, t.TempDir())
		startSlave(t, sst, haConfig(), nil, m.Addr().String())
		slaves = append(slaves, sst)
	}
	require.Eventually(t, func() bool { return len(m.Status().Slaves) == 3 }, waitFor, time.Millisecond)
	end := putN(t, mst, 0, 800, 2000)
	for _, sst := range slaves {
		waitOffset(t, sst, end)
		assertSameCommitLog(t, mst, sst)
		assertSameQueues(t, mst, sst)
	}
	require.Eventually(t, func() bool {
		for _, s := range m.Status().Slaves {
			if s.AckOffset != end {
				return false
			}
		}
		return true
	}, waitFor, time.Millisecond)
}

// A slave whose store is closed and reopened resumes from its own max
// offset: nothing is fetched twice, nothing is missed.
func TestReplicationSlaveRestartResumes(t *testing.T) {
	mst := openStore(t, t.TempDir())
	m := startMaster(t, mst, haConfig(), nil)
	dir := t.TempDir()
	sst := openStore(t, dir)
	sl := startSlave(t, sst, haConfig(), nil, m.Addr().String())
	end := putN(t, mst, 0, 500, 2000)
	waitOffset(t, sst, end)
	require.NoError(t, sl.Shutdown(context.Background()))
	require.NoError(t, sst.Shutdown(context.Background()))

	end = putN(t, mst, 500, 500, 2000) // while the slave is down
	sst = openStore(t, dir)
	startSlave(t, sst, haConfig(), nil, m.Addr().String())
	waitOffset(t, sst, end)
	assertSameCommitLog(t, mst, sst)
	assertSameQueues(t, mst, sst)
	for q := range int32(3) {
		assert.Equal(t, mst.MaxOffsetInQueue("TopicHA", q), sst.MaxOffsetInQueue("TopicHA", q))
	}
}

// A slave killed with SIGKILL in the middle of a catch-up recovers with the
// normal store recovery and resumes from what it holds whole.
func TestReplicationSlaveSurvivesKill9(t *testing.T) {
	if os.Getenv("HA_KILL9_CHILD") != "" {
		t.Skip("run by the parent test")
	}
	mst := openStore(t, t.TempDir())
	end := putN(t, mst, 0, 3000, 2000) // ~9 MiB
	m := startMaster(t, mst, haConfig(), nil)
	// The child follows through a proxy that stops passing the master's
	// bytes after 2 MiB, so it is killed in the middle of its catch-up
	// whatever the machine's speed.
	gate := newGatedProxy(t, m.Addr().String(), 2<<20)
	// Seeded with the master's first record, the slave asks for the whole
	// log (a new one would start at the newest file).
	dir := t.TempDir()
	seed, err := store.Open(storeConfig(dir), nil)
	require.NoError(t, err)
	first := masterBytes(t, mst, 0, int(binary.BigEndian.Uint32(masterBytes(t, mst, 0, 4))))
	_, err = seed.AppendReplica(0, first)
	require.NoError(t, err)
	require.NoError(t, seed.Shutdown(context.Background()))

	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HA_KILL9_CHILD="+dir, "HA_KILL9_MASTER="+gate.addr())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The child prints "applied" once it has applied something.
	buf := make([]byte, 64)
	n, err := out.Read(buf)
	require.NoError(t, err)
	require.Contains(t, string(buf[:n]), "applied")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	_, err = os.Stat(filepath.Join(dir, "abort"))
	require.NoError(t, err, "the child died without a clean shutdown")
	sst := openStore(t, dir)
	held := sst.CommitLog().MaxOffset()
	require.Greater(t, held, int64(len(first)))
	require.LessOrEqual(t, held, int64(2<<20), "killed before it caught up")
	checkWholeRecords(t, sst)
	startSlave(t, sst, haConfig(), nil, m.Addr().String())
	waitOffset(t, sst, end)
	assertSameCommitLog(t, mst, sst)
	assertSameQueues(t, mst, sst)
}

// TestKill9Child is the slave process TestReplicationSlaveSurvivesKill9
// kills.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv("HA_KILL9_CHILD")
	if dir == "" {
		t.Skip("run by TestReplicationSlaveSurvivesKill9")
	}
	st, err := store.Open(storeConfig(dir), nil)
	require.NoError(t, err)
	sl, err := NewSlave(st, haConfig(), nil)
	require.NoError(t, err)
	sl.Start()
	sl.SetMasterAddress(os.Getenv("HA_KILL9_MASTER"))
	deadline := time.Now().Add(waitFor)
	for seeded := st.CommitLog().MaxOffset(); st.CommitLog().MaxOffset() == seeded; {
		if time.Now().After(deadline) {
			t.Fatal("nothing applied")
		}
		time.Sleep(time.Millisecond)
	}
	os.Stdout.WriteString("applied\n")
	time.Sleep(time.Minute) // killed long before
}

// gatedProxy passes one slave connection to a master, and at most limit
// bytes of the master's side.
type gatedProxy struct {
	ln net.Listener
}

func newGatedProxy(t *testing.T, master string, limit int64) *gatedProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &gatedProxy{ln: ln}
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mc, err := net.Dial("tcp", master)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, mc)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(mc, c) }()
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, io.LimitReader(mc, limit))
				_, _ = io.Copy(io.Discard, mc) // hold the rest back
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *gatedProxy) addr() string { return p.ln.Addr().String() }

func TestReplicationMasterRestart(t *testing.T) {
	mdir := t.TempDir()
	mst := openStore(t, mdir)
	m := startMaster(t, mst, haConfig(), nil)
	addr := m.Addr().String()
	sst := openStore(t, t.TempDir())
	sl := startSlave(t, sst, haConfig(), nil, addr)
	end := putN(t, mst, 0, 400, 2000)
	waitOffset(t, sst, end)

	require.NoError(t, m.Shutdown(context.Background()))
	require.NoError(t, mst.Shutdown(context.Background()))
	require.Eventually(t, func() bool { return sl.Status().State != SlaveFollowing }, waitFor, time.Millisecond)

	mst = openStore(t, mdir)
	m2, err := NewMaster(mst, haConfig(), nil)
	require.NoError(t, err)
	require.NoError(t, m2.Start(addr))
	t.Cleanup(func() { _ = m2.Shutdown(context.Background()) })
	end = putN(t, mst, 400, 400, 2000)
	waitOffset(t, sst, end)
	assertSameCommitLog(t, mst, sst)
	assertSameQueues(t, mst, sst)
	require.Eventually(t, func() bool { return sl.Status().State == SlaveFollowing }, waitFor, time.Millisecond)
}

// A slave follows a new master address without a restart: here its master
// moves to a former slave (promoted), which holds the same commitlog.
func TestReplicationMasterAddressChange(t *testing.T) {
	a := openStore(t, t.TempDir())
	ma := startMaster(t, a, haConfig(), nil)
	b := openStore(t, t.TempDir())
	slb := startSlave(t, b, haConfig(), nil, ma.Addr().String())
	c := openStore(t, t.TempDir())
	slc := startSlave(t, c, haConfig(), nil, ma.Addr().String())
	end := putN(t, a, 0, 400, 2000)
	waitOffset(t, b, end)
	waitOffset(t, c, end)

	// b stops following and becomes a master; c is pointed at it.
	require.NoError(t, slb.Shutdown(context.Background()))
	require.NoError(t, ma.Shutdown(context.Background()))
	mb := startMaster(t, b, haConfig(), nil)
	slc.SetMasterAddress(mb.Addr().String())
	require.Eventually(t, func() bool {
		s := mb.Status()
		return len(s.Slaves) == 1 && slc.Status().State == SlaveFollowing
	}, waitFor, time.Millisecond)
	assert.Equal(t, mb.Addr().String(), slc.Status().MasterAddr)
	// b takes writes as a master now.
	for i := 400; i < 800; i++ {
		r := b.PutMessage(context.Background(), msg("TopicHA", int32(i%3), i, 2000))
		require.Equal(t, store.PutOK, r.Status, "%v", r.Err)
		end = r.WroteOffset + int64(r.WroteBytes)
	}
	waitOffset(t, c, end)
	assertSameCommitLog(t, b, c)
	assertSameQueues(t, b, c)

	slc.SetMasterAddress("")
	require.Eventually(t, func() bool { return slc.Status().State == SlaveIdle }, waitFor, time.Millisecond)
}

// A master that lost the tail its slave holds (an unflushed tail, here
// never written) must not be followed silently: the slave refuses, says
// both offsets, shows it in its status and retries with backoff. It still
// refuses once the master has written past its offset with other data.
func TestReplicationDivergedSlaveRefuses(t *testing.T) {
	orig := openStore(t, t.TempDir())
	mo := startMaster(t, orig, haConfig(), nil)
	lossy := openStore(t, t.TempDir()) // the master after it lost its tail
	sll := startSlave(t, lossy, haConfig(), nil, mo.Addr().String())
	slave := openStore(t, t.TempDir())
	log, hook := testLog()
	sl := startSlave(t, slave, haConfig(), log, mo.Addr().String())

	kept := putN(t, orig, 0, 300, 2000)
	waitOffset(t, lossy, kept)
	require.NoError(t, sll.Shutdown(context.Background())) // the lost tail follows
	end := putN(t, orig, 300, 100, 2000)
	waitOffset(t, slave, end)
	require.NoError(t, mo.Shutdown(context.Background()))

	mlog, mhook := testLog()
	ml := startMaster(t, lossy, haConfig(), mlog)
	sl.SetMasterAddress(ml.Addr().String())
	require.Eventually(t, func() bool { s := sl.Status(); return s.State == SlaveRefused && s.Diverged }, waitFor, time.Millisecond)
	st := sl.Status()
	assert.Contains(t, st.LastError, strconv.FormatInt(end, 10), "the slave's offset")
	assert.Contains(t, st.LastError, strconv.FormatInt(kept, 10), "the master's offset")
	assert.Equal(t, kept, st.MasterMaxOffset)
	assert.True(t, logged(hook, "Not following"))
	assert.True(t, logged(mhook, "beyond this master's commitlog"))
	assert.Empty(t, ml.Status().Slaves)
	assert.Equal(t, end, slave.CommitLog().MaxOffset(), "the slave keeps its data")

	// Retries back off: the wait doubles up to ReconnectMax, not a tight loop.
	accepted := func() int {
		n := 0
		for _, e := range mhook.AllEntries() {
			if e.Message == "HA connection accepted" {
				n++
			}
		}
		return n
	}
	before, t0 := accepted(), time.Now()
	time.Sleep(time.Second)
	tries := accepted() - before
	// With 20 ms doubling to 200 ms, a second holds at most 1/0.2 + a few.
	assert.LessOrEqual(t, tries, int(time.Since(t0)/(200*time.Millisecond))+5, "retries in %v", time.Since(t0))
	assert.GreaterOrEqual(t, tries, 1)

	// The new master writes past the slave's end with other data: the
	// bytes before the slave's offset differ, and it still refuses.
	putN(t, lossy, 5000, 400, 1500)
	require.Greater(t, lossy.CommitLog().MaxOffset(), end)
	require.Eventually(t, func() bool {
		return strings.Contains(sl.Status().LastError, "differ") && sl.Status().Diverged
	}, waitFor, time.Millisecond)
	assert.True(t, logged(mhook, "differs from this master's"))
	assert.Equal(t, end, slave.CommitLog().MaxOffset())
}

// A RocketMQ-style slave (no hello) ahead of the master gets a heartbeat
// frame at the master's max, which a RocketMQ slave takes as an offset
// mismatch (HAClient.dispatchReadRequest) and closes on.
func TestReplicationDivergedPlainSlaveToldMasterMax(t *testing.T) {
	mst := openStore(t, t.TempDir())
	end := putN(t, mst, 0, 10, 1000)
	m := startMaster(t, mst, haConfig(), nil)
	s := dialRaw(t, m.Addr().String())
	s.report(end * 2)
	off, body := s.frame()
	assert.Equal(t, end, off)
	assert.Empty(t, body)
	s.expectClosed()
}

// A slave that was down while its master wrote catches up, and the master's
// writers are not held up meanwhile: the push reads the mapped commitlog
// without its lock, even while a write to a slave that stopped reading
// blocks.
func TestReplicationCatchUpDoesNotBlockWriters(t *testing.T) {
	mst := openStore(t, t.TempDir())
	m := startMaster(t, mst, haConfig(), nil)
	dir := t.TempDir()
	sst := openStore(t, dir)
	sl := startSlave(t, sst, haConfig(), nil, m.Addr().String())
	end := putN(t, mst, 0, 10, 1000)
	waitOffset(t, sst, end)
	require.NoError(t, sl.Shutdown(context.Background()))
	require.NoError(t, sst.Shutdown(context.Background()))
	end = putN(t, mst, 10, 4000, 3000) // ~18 MiB while the slave is down

	// A slave that asks for everything and reads nothing: the master's
	// push blocks in its write, holding a mapped file.
	stuck := dialRaw(t, m.Addr().String())
	stuck.report(int64(binary.BigEndian.Uint32(masterBytes(t, mst, 0, 4)))) // after the first record
	require.Eventually(t, func() bool { return len(m.Status().Slaves) == 1 }, waitFor, time.Millisecond)

	sst = openStore(t, dir)
	startSlave(t, sst, haConfig(), nil, m.Addr().String())
	putsDone := make(chan int64, 1)
	go func() {
		var last int64
		defer func() { putsDone <- last }()
		for i := range 500 {
			r := mst.PutMessage(context.Background(), msg("TopicHA", int32(i%3), 20000+i, 500))
			if r.Status != store.PutOK {
				return
			}
			last = r.WroteOffset + int64(r.WroteBytes)
		}
	}()
	var last int64
	select {
	case last = <-putsDone:
	case <-time.After(waitFor):
		t.Fatal("puts blocked while slaves caught up")
	}
	require.Greater(t, last, end)
	waitOffset(t, sst, last)
	assertSameCommitLog(t, mst, sst)
	assertSameQueues(t, mst, sst)
}
