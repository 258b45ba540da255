package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/internal/fsutil"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Slave metadata sync (RocketMQ's SlaveSynchronize): a slave copies from its
// master what a consumer needs to carry on here when the master is gone,
// and what this broker needs should it become a master. Messages come over
// the HA port; this is the rest.
const (
	// slaveSyncFirst is how long after start the first sync runs, and
	// slaveSyncInterval how often it runs after that (RocketMQ: 3 s, 10 s).
	slaveSyncFirst    = 3 * time.Second
	slaveSyncInterval = 10 * time.Second
	// slaveSyncTimeout bounds each of the four calls to the master.
	slaveSyncTimeout = 5 * time.Second
)

// slaveSyncState is the slave sync's schedule and outcome.
type slaveSyncState struct {
	first, every time.Duration // tests shorten them
	now          chan struct{} // a new master: sync at once
	last         atomic.Int64  // unix ms of the last complete sync (0: none yet)
}

// errNoMaster means a slave does not know its master's address yet.
var errNoMaster = errors.New("broker: the master's address is not known yet (learned from the nameserver's REGISTER_BROKER answer)")

// slaveSyncLoop runs syncFromMaster on a SLAVE every slaveSyncInterval, and
// at once when the master's address changes, until the broker stops or
// roleStop closes (controller mode: the broker is no longer a slave).
func (b *Broker) slaveSyncLoop(roleStop <-chan struct{}) {
	t := time.NewTimer(b.slaveSync.first)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-roleStop:
			return
		case <-t.C:
		case <-b.slaveSync.now:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		if err := b.syncFromMaster(); err != nil && !errors.Is(err, errNoMaster) {
			b.log.WithError(err).Warn("slave sync from the master failed; the next round retries")
		}
		t.Reset(b.slaveSync.every)
	}
}

// syncFromMaster copies the topic table, consumer offsets, delay offsets and
// subscription groups from the master, each step on its own: one that fails
// does not keep the others from being copied.
func (b *Broker) syncFromMaster() error {
	master := b.MasterAddr()
	if master == "" {
		return errNoMaster
	}
	log := b.log.WithField("master", master)
	var errs []error
	if err := b.syncTopicConfig(master); err != nil {
		errs = append(errs, fmt.Errorf("topics: %w", err))
	}
	if err := b.syncConsumerOffsets(master); err != nil {
		errs = append(errs, fmt.Errorf("consumer offsets: %w", err))
	}
	if err := b.syncDelayOffsets(master); err != nil {
		errs = append(errs, fmt.Errorf("delay offsets: %w", err))
	}
	if err := b.syncSubscriptionGroups(master); err != nil {
		errs = append(errs, fmt.Errorf("subscription groups: %w", err))
	}
	if len(errs) == 0 {
		b.slaveSync.last.Store(time.Now().UnixMilli())
		log.Debug("slave sync from the master done")
	}
	return errors.Join(errs...)
}

// callMaster sends one request to the master and returns the body of its
// SUCCESS answer.
func (b *Broker) callMaster(master string, code remoting.RequestCode) ([]byte, error) {
	ctx, cancel := context.WithTimeout(b.stopCtx, slaveSyncTimeout) // a shutdown does not wait for a silent master
	defer cancel()
	resp, err := b.nsClient.InvokeSync(ctx, master, remoting.NewRequest(code, nil, nil))
	if err != nil {
		return nil, err
	}
	if resp.ResponseCode() != remoting.Success {
		return nil, fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
	}
	return resp.Body, nil
}

// syncTopicConfig takes the master's topic table when its version differs
// from ours (GET_ALL_TOPIC_CONFIG).
func (b *Broker) syncTopicConfig(master string) error {
	body, err := b.callMaster(master, remoting.GetAllTopicConfig)
	if err != nil {
		return err
	}
	w, err := protocol.DecodeTopicConfigSerializeWrapper(body)
	if err != nil {
		return err
	}
	changed, err := b.topics.ReplaceFromMaster(w)
	if changed {
		b.log.WithFields(logrus.Fields{"topics": len(w.TopicConfigTable), "version": w.DataVersion}).Info("topic table copied from the master")
	}
	return err
}

// syncConsumerOffsets merges the master's consumer offsets into ours and
// persists them (GET_ALL_CONSUMER_OFFSET).
func (b *Broker) syncConsumerOffsets(master string) error {
	body, err := b.callMaster(master, remoting.GetAllConsumerOffset)
	if err != nil {
		return err
	}
	if err := b.consume.offsets.MergeFromMaster(body); err != nil {
		return err
	}
	return b.consume.offsets.Persist()
}

// syncDelayOffsets writes the master's delay-level progress to
// delayOffset.json (GET_ALL_DELAY_OFFSET), as RocketMQ does: a slave runs no
// schedule service, and one that becomes a master starts from this file.
func (b *Broker) syncDelayOffsets(master string) error {
	body, err := b.callMaster(master, remoting.GetAllDelayOffset)
	if err != nil {
		return err
	}
	var t delayOffsetTable
	if err := fsutil.DecodeJSONObject(fastjsonIntKey.ReplaceAll(body, []byte(`$1"$2"$3`)), &t); err != nil {
		return fmt.Errorf("not a delay offset table: %w", err)
	}
	return writeMetadataJSON(b.schedule.path, "delay offsets", &t)
}

// syncSubscriptionGroups takes the master's subscription groups when their
// version differs from ours (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
func (b *Broker) syncSubscriptionGroups(master string) error {
	body, err := b.callMaster(master, remoting.GetAllSubscriptionGroupConfig)
	if err != nil {
		return err
	}
	var w protocol.SubscriptionGroupWrapper
	if err := json.Unmarshal(body, &w); err != nil {
		return fmt.Errorf("not a subscription group table: %w", err)
	}
	changed, err := b.consume.groups.ReplaceFromMaster(&w)
	if changed {
		b.log.WithFields(logrus.Fields{"groups": len(w.SubscriptionGroupTable), "version": w.DataVersion}).Info("subscription groups copied from the master")
	}
	return err
}
