package protocol

import (
	"encoding/json"
	"sort"
)

// TopicList is the body of GET_ALL_TOPIC_LIST_FROM_NAMESERVER and
// GET_TOPICS_BY_CLUSTER (TopicList.java):
//
//	{"topicList":["a","b"],"brokerAddr":null}
type TopicList struct {
	Topics     []string
	BrokerAddr string // empty is written as null
}

type topicListJSON struct {
	TopicList  []string `json:"topicList"`
	BrokerAddr *string  `json:"brokerAddr"`
}

// MarshalJSON writes the topics sorted (the Java side is a set, so order
// carries no meaning) and an empty broker address as null.
func (tl TopicList) MarshalJSON() ([]byte, error) {
	j := topicListJSON{TopicList: append([]string{}, tl.Topics...)}
	sort.Strings(j.TopicList)
	if tl.BrokerAddr != "" {
		j.BrokerAddr = &tl.BrokerAddr
	}
	return json.Marshal(&j)
}

// UnmarshalJSON reads the Java shape.
func (tl *TopicList) UnmarshalJSON(b []byte) error {
	var j topicListJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	tl.Topics = j.TopicList
	tl.BrokerAddr = ""
	if j.BrokerAddr != nil {
		tl.BrokerAddr = *j.BrokerAddr
	}
	return nil
}

// Encode renders compact JSON.
func (tl *TopicList) Encode() ([]byte, error) { return json.Marshal(tl) }

// DecodeTopicList parses a TopicList body.
func DecodeTopicList(b []byte) (*TopicList, error) {
	var tl TopicList
	if err := json.Unmarshal(b, &tl); err != nil {
		return nil, wrapBody("TopicList", err)
	}
	return &tl, nil
}
