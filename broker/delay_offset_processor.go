package broker

import (
	"encoding/json"

	"github.com/gorocketmq/gorocketmq/remoting"
)

func (b *Broker) registerDelayOffsetProcessor() {
	b.server.Handle(remoting.GetAllDelayOffset, b.pools.Admin, b.processGetAllDelayOffset)
}

// processGetAllDelayOffset answers GET_ALL_DELAY_OFFSET (a slave's sync and
// admin tools) with the delay-level progress in delayOffset.json's shape
// ({"offsetTable":{"<level>":<next offset>}}), read from memory so it is
// current, not as of the last persist.
func (b *Broker) processGetAllDelayOffset(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	s := b.schedule
	s.mu.Lock()
	t := delayOffsetTable{OffsetTable: make(map[int32]int64, len(s.offsets))}
	for level, off := range s.offsets {
		t.OffsetTable[level] = off
	}
	s.mu.Unlock()
	body, err := json.Marshal(&t)
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.Body = body
	return resp, nil
}
