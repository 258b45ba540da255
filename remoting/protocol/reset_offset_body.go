package protocol

import (
	"strconv"
)

// ResetOffsetBody is the body of INVOKE_BROKER_TO_RESET_OFFSET's response and
// of RESET_CONSUMER_CLIENT_OFFSET: the new offset of each queue. RocketMQ
// writes it with fastjson, whose MessageQueue map keys are object literals
// (not strict JSON); Java and Go clients both read that form.
type ResetOffsetBody struct {
	OffsetTable map[MessageQueue]int64
}

// Encode renders the body as fastjson does, queues in a stable order.
func (r *ResetOffsetBody) Encode() ([]byte, error) {
	mqs := make([]MessageQueue, 0, len(r.OffsetTable))
	for mq := range r.OffsetTable {
		mqs = append(mqs, mq)
	}
	SortMessageQueues(mqs)
	b := append(make([]byte, 0, 64+64*len(mqs)), `{"offsetTable":{`...)
	for i, mq := range mqs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = AppendMessageQueueKey(b, mq); err != nil {
			return nil, err
		}
		b = append(b, ':')
		b = strconv.AppendInt(b, r.OffsetTable[mq], 10)
	}
	return append(b, "}}"...), nil
}

// DecodeResetOffsetBody parses the fastjson form Encode writes.
func DecodeResetOffsetBody(b []byte) (*ResetOffsetBody, error) {
	out := &ResetOffsetBody{OffsetTable: map[MessageQueue]int64{}}
	err := DecodeMessageQueueTable(b, "offsetTable", func(mq MessageQueue, v []byte) error {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return err
		}
		out.OffsetTable[mq] = n
		return nil
	})
	if err != nil {
		return nil, wrapBody("ResetOffsetBody", err)
	}
	return out, nil
}
