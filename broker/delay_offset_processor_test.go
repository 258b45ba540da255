package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGetAllDelayOffsetReportsProgress(t *testing.T) {
	baVerifyNoLeaks(t)
	b, cl := t5Start(t, t5Config(t))
	bcCreateTopic(t, b, "delayO", 1)
	resp := t5Send(t, cl, b, "delayO", 0, "x", map[string]string{message.PropDelayTimeLevel: "1"})
	require.Equal(t, int32(remoting.Success), resp.Code, resp.Remark)
	require.Eventually(t, func() bool { return b.schedule.Offset(1) == 1 }, 5*time.Second, 5*time.Millisecond)

	resp = baInvoke(t, cl, b.Addr(), remoting.NewRequest(remoting.GetAllDelayOffset, nil, nil))
	require.Equal(t, remoting.Success, resp.ResponseCode(), resp.Remark)
	var table struct {
		OffsetTable map[string]int64 `json:"offsetTable"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &table), string(resp.Body))
	assert.EqualValues(t, 1, table.OffsetTable["1"], "level 1 delivered its one message")
}
