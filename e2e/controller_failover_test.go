package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gorocketmq/gorocketmq/message"
)

// ackedBy reports whether a SEND_OK came from the broker at addr (its
// offsetMsgId names the storing broker).
func ackedBy(r SendRes, addr string) bool {
	host, _, err := message.ParseOffsetMsgID(r.OffsetMsgID)
	return err == nil && host.String() == addr
}

// TestControllerFailoverOfficialClient: three nameservers, each with a
// controller, and three replicas of broker-a in controller mode
// (SYNC_MASTER: a send is SEND_OK once every in-sync replica has it). Two
// official-client producers send a steady stream of sync sends.
//
//   - The master is kill -9ed and, during the failover, the Raft leader
//     controller too: the two remaining controllers elect a leader, which
//     elects an in-sync replica at a new epoch; it registers as brokerId 0
//     and the official client's sends succeed on it after the client's
//     route refresh (30 s, fixed in rocketmq-client-go).
//   - A minority (one follower controller) is killed: sends go on.
//   - The old master comes back with whatever tail it had: it becomes a
//     slave, cuts what the new master lacks, and ends with a commitlog
//     identical to the new master's and the same epochs; the in-sync set
//     is whole again.
//   - All three controllers are killed and restarted: they keep the group
//     (same master, same epoch) and sends succeed again.
//
// Finally an official push consumer gets every SEND_OK message, and no
// message that was never sent; a message whose send failed (in flight at a
// kill) may be delivered (its outcome was unknown), never one cut from the
// old master's tail, which no replica acknowledged and no consumer reads
// (the cut itself is checked byte for byte in
// broker.TestControllerModeFailoverInProcess).
func TestControllerFailoverOfficialClient(t *testing.T) {
	t.Parallel()
	started := time.Now()
	lap := started
	var laps []string
	mark := func(name string) {
		laps = append(laps, fmt.Sprintf("%s %v", name, time.Since(lap).Round(time.Millisecond)))
		lap = time.Now()
	}
	cc := startCtlCluster(t, 3)
	for id := 1; id <= 3; id++ {
		cc.addReplica("broker-a", id, nil)
	}
	m, epoch := cc.waitMaster("broker-a", "", 3)
	topic := uniq("CtlFailover")
	const queues = 4
	cc.createTopicOn("broker-a", topic, queues, m)
	mark("start")

	d := startDriver(t, cc.nsList())
	prod := d.NewProducer(t, "")
	sends := newDriverSends()
	sends.failPause = 20 * time.Millisecond
	// One send alone first, as in TestHAMasterFailoverOfficialClient: sends
	// racing the client's first route lookup can fail.
	sends.run(t, prod, topic, "w", 1, 1, nil)
	require.Len(t, sends.ackedIDs(nil), 1, "the first send failed: %v", sends.failed)
	stop := make(chan struct{})
	var sendWG sync.WaitGroup
	sendWG.Add(1)
	go func() {
		defer sendWG.Done()
		sends.run(t, prod, topic, "s", 2, 100000, stop)
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		sendWG.Wait()
	}()
	ackedOn := func(addr string, after time.Time) int {
		return len(sends.ackedIDs(func(_ string, r SendRes) bool { return r.Start.After(after) && ackedBy(r, addr) }))
	}
	require.Eventually(t, func() bool { return ackedOn(m.BrokerAddr, started) >= 50 }, failoverWait, 5*time.Millisecond,
		"the master acknowledged only %d sends", ackedOn(m.BrokerAddr, started))
	mark("steady")

	// The master dies, then the Raft leader, before the controllers noticed.
	leader := cc.waitLeader()
	m.killBroker()
	killedAt := time.Now()
	cc.killNamesrv(leader)
	nm, nepoch := cc.waitMaster("broker-a", m.BrokerAddr, 0)
	elected := time.Since(killedAt)
	assert.Greater(t, nepoch, epoch, "a promotion starts a new epoch")
	require.Eventually(t, func() bool { return ackedOn(nm.BrokerAddr, killedAt) >= 20 }, failoverWait, 5*time.Millisecond,
		"the new master %s acknowledged only %d official sends", nm.BrokerAddr, ackedOn(nm.BrokerAddr, killedAt))
	resumed := time.Since(killedAt)
	assert.Zero(t, ackedOn(m.BrokerAddr, killedAt.Add(time.Second)), "SEND_OK from the dead master")
	cc.startNamesrv(leader)
	mark("master and leader killed")

	// A minority of controllers dies: the group goes on.
	follower := -1
	l := cc.waitLeader()
	for i := range cc.ns {
		if i != l {
			follower = i
			break
		}
	}
	cc.killNamesrv(follower)
	minorityAt := time.Now()
	require.Eventually(t, func() bool { return ackedOn(nm.BrokerAddr, minorityAt) >= 20 }, ctlWait, 5*time.Millisecond,
		"with one controller down the master acknowledged only %d sends", ackedOn(nm.BrokerAddr, minorityAt))
	cc.startNamesrv(follower)
	mark("minority killed")

	// The old master returns: it follows, cut to the new master's history.
	cc.startReplica(m)
	again, _ := cc.waitMaster("broker-a", "", 3)
	require.Equal(t, nm.BrokerAddr, again.BrokerAddr, "the group changed master when the old one came back")
	close(stop)
	sendWG.Wait()
	var end int64
	for _, v := range cc.replicas["broker-a"] {
		if v != nm {
			end = waitCaughtUp(t, nm, v)
			requireSameCommitLog(t, nm, v, end)
		}
	}
	want := cc.epochs(nm).EpochList
	for _, v := range cc.replicas["broker-a"] {
		assert.Equal(t, want, cc.epochs(v).EpochList, "replica %s has other epochs than the master", v.BrokerAddr)
	}
	cut := strings.Contains(m.broker.log(), "cutting the commitlog tail")
	mark("old master back")

	// Every controller dies and comes back: the state is in their Raft logs.
	for i := range cc.ns {
		cc.killNamesrv(i)
	}
	for i := range cc.ns {
		cc.startNamesrv(i)
	}
	cc.waitLeader()
	after, aepoch := cc.waitMaster("broker-a", "", 3)
	assert.Equal(t, nm.BrokerAddr, after.BrokerAddr, "the restarted controllers changed the master")
	assert.Equal(t, nepoch, aepoch, "the restarted controllers changed the epoch")
	restartedAt := time.Now()
	for i := 0; ackedOn(nm.BrokerAddr, restartedAt) < 10 && time.Since(restartedAt) < ctlWait; i++ {
		sends.run(t, prod, topic, fmt.Sprintf("r%d", i), 1, 1, nil)
	}
	require.GreaterOrEqual(t, ackedOn(nm.BrokerAddr, restartedAt), 10, "no SEND_OK after the controllers restarted")
	mark("controllers restarted")

	// Every SEND_OK is consumed; nothing is delivered that was not sent.
	in := NewInbox()
	d.StartPush(t, PushSpec{Group: uniq("CG_CTL"), Topic: topic}, in)
	acked := sends.ackedIDs(nil)
	WaitAllWithin(t, failoverWait, bodiesOf(acked), in)
	unknown := 0
	sends.mu.Lock()
	for _, g := range in.Msgs() {
		id := uniqOfBody([]byte(g.Body))
		_, ok := sends.acked[id]
		_, failed := sends.failed[id]
		_, stored := sends.stored[id]
		require.True(t, ok || failed || stored, "delivered a message never sent: %.60q", g.Body)
		require.Equal(t, string(crashBody(id)), g.Body, "delivered body of %s differs from what was sent", id)
		if !ok {
			unknown++
		}
	}
	failed, stored := len(sends.failed), len(sends.stored)
	for id, r := range sends.acked {
		assert.Equal(t, primitive.SendOK, r.Status, id)
	}
	sends.mu.Unlock()
	mark("consumed")
	t.Logf("controller failover: %d SEND_OK, all consumed; %d sends failed (in flight or before the client's route refresh), %d stored with another status, %d of those delivered; "+
		"new master elected %v after the kill (leader controller killed too), first official SEND_OK on it within %v; old master's tail cut: %v; %s; took %v",
		len(acked), failed, stored, unknown, elected.Round(time.Millisecond), resumed.Round(time.Millisecond), cut,
		strings.Join(laps, ", "), time.Since(started).Round(time.Millisecond))
}
