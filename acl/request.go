package acl

import (
	"slices"
	"strings"
	"sync"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// Header keys of the ACL fields (SessionCredentials.java), and the field
// Java clients add to unique-key queries, which brokers leave out of the
// signed content (MixAll.UNIQUE_MSG_QUERY_FLAG).
const (
	FieldAccessKey     = "AccessKey"
	FieldSignature     = "Signature"
	FieldSecurityToken = "SecurityToken"
	fieldUniqueKey     = "_UNIQUE_KEY_QUERY"
)

// field is one header field of a request.
type field struct{ key, value string }

// need is one resource a request touches and the permission it takes: a
// topic, or a group as its retry topic %RETRY%<group>.
type need struct {
	resource string
	perm     Perm
}

// request is what a decision reads from a command: the ACL fields, every
// header field sorted by key (the signed content), the body, and the
// resources the request code touches. Pooled: a check allocates nothing
// for a request whose header is a map, one string for a RawExt block.
type request struct {
	cmd           *remoting.Command
	code          remoting.RequestCode
	accessKey     string
	signature     string
	securityToken string
	fields        []field // sorted by key; Signature and _UNIQUE_KEY_QUERY left out
	dupKey        string  // a key the header holds twice (refused)
	unreadable    string  // why the resources could not be read (refused)
	body          []byte
	needs         []need
	content       []byte   // scratch for the signed bytes
	sum           [20]byte // the MAC (heap room: a stack array passed to Sum escapes)
}

var requestPool = sync.Pool{New: func() any {
	return &request{fields: make([]field, 0, 16), needs: make([]need, 0, 4), content: make([]byte, 0, 512)}
}}

// readRequest builds the view of cmd's header and body; its resources are
// read later (addNeeds), once the caller is known: an unknown caller's
// HEART_BEAT body is never decoded. Release it with put.
func readRequest(cmd *remoting.Command) *request {
	r := requestPool.Get().(*request)
	r.readFields(cmd)
	r.cmd = cmd
	return r
}

// readFields reads cmd's code, body and header fields.
func (r *request) readFields(cmd *remoting.Command) {
	r.code = cmd.RequestCode()
	r.body = cmd.Body
	add := func(k, v string) {
		switch k {
		case FieldSignature:
			r.signature = v
			return
		case fieldUniqueKey:
			return
		case FieldAccessKey:
			r.accessKey = v
		case FieldSecurityToken:
			r.securityToken = v
		}
		r.fields = append(r.fields, field{k, v})
	}
	for k, v := range cmd.ExtFields {
		add(k, v)
	}
	if len(cmd.RawExt) > 0 {
		// One copy of the block: keys and values are substrings of it.
		for k, v := range remoting.StringFields(string(cmd.RawExt)) {
			add(k, v)
		}
	}
	// The signed content is the values in key order (String.compareTo
	// order in Java, the same as byte order for the ASCII keys used).
	sortFields(r.fields)
	for i := 1; i < len(r.fields); i++ {
		if r.fields[i].key == r.fields[i-1].key {
			// A map cannot hold a key twice; a binary header can. The
			// processor would read one value and the signature another.
			r.dupKey = r.fields[i].key
			break
		}
	}
}

// sortFields sorts by key: by insertion for a header's usual dozen or two
// fields (a third of slices.SortFunc's time there), by pdqsort beyond, so
// a header of thousands of fields costs n log n, not n².
func sortFields(f []field) {
	if len(f) > 32 {
		slices.SortFunc(f, func(a, b field) int { return strings.Compare(a.key, b.key) })
		return
	}
	for i := 1; i < len(f); i++ {
		x, j := f[i], i
		for ; j > 0 && x.key < f[j-1].key; j-- {
			f[j] = f[j-1]
		}
		f[j] = x
	}
}

func (r *request) put() {
	clear(r.fields)
	clear(r.needs)
	*r = request{fields: r.fields[:0], needs: r.needs[:0], content: r.content[:0]}
	requestPool.Put(r)
}

// get returns the value of header field key ("" when absent).
func (r *request) get(key string) string {
	i, ok := slices.BinarySearchFunc(r.fields, key, func(f field, k string) int { return strings.Compare(f.key, k) })
	if !ok {
		return ""
	}
	return r.fields[i].value
}

func (r *request) need(resource string, p Perm) {
	if resource == "" {
		return // RocketMQ skips absent resources too
	}
	for i := range r.needs {
		if r.needs[i].resource == resource {
			r.needs[i].perm |= p
			return
		}
	}
	r.needs = append(r.needs, need{resource, p})
}

func (r *request) needGroup(group string, p Perm) {
	if group != "" {
		r.need(RetryGroupTopicPrefix+group, p)
	}
}

// needTopicOrRetry is a send's need: PUB on the topic, or for a send to a
// retry topic (a consumer's fallback when sending back fails) SUB on the
// group the retry topic belongs to. RocketMQ checks SUB on the producer
// group named in the request instead (SEND_MESSAGE's lookup of "group"
// finds nothing at all); the retry topic's own group is the one its
// messages go back to.
func (r *request) needTopicOrRetry(topic string) {
	if strings.HasPrefix(topic, RetryGroupTopicPrefix) {
		r.need(topic, PermSub)
		return
	}
	r.need(topic, PermPub)
}

// addNeeds lists the resources the request's code touches, as
// PlainAccessValidator.parse does, plus SEND_BATCH_MESSAGE (which RocketMQ
// leaves unchecked: a batch could go to any topic) and
// QUERY_CONSUMER_OFFSET. Other codes need only a valid signature, or an
// admin account (adminCodes).
func (r *request) addNeeds() {
	cmd := r.cmd
	switch r.code {
	case remoting.SendMessage:
		r.needTopicOrRetry(r.get("topic"))
	case remoting.SendMessageV2, remoting.SendBatchMessage:
		r.needTopicOrRetry(r.get("b"))
	case remoting.ConsumerSendMsgBack:
		r.needGroup(r.get("group"), PermSub)
	case remoting.PullMessage:
		r.need(r.get("topic"), PermSub)
		r.needGroup(r.get("consumerGroup"), PermSub)
	case remoting.QueryMessage:
		r.need(r.get("topic"), PermSub)
	case remoting.HeartBeat:
		// The processor's own decoder: what it registers is what is checked.
		hb, err := protocol.DecodeHeartbeatData(cmd.Body)
		if err != nil {
			r.unreadable = "the HEART_BEAT body does not parse, so its groups cannot be checked"
			return
		}
		for _, c := range hb.ConsumerDataSet {
			r.needGroup(c.GroupName, PermSub)
			for _, s := range c.SubscriptionDataSet {
				r.need(s.Topic, PermSub)
			}
		}
	case remoting.UnregisterClient, remoting.GetConsumerListByGroup:
		r.needGroup(r.get("consumerGroup"), PermSub)
	case remoting.UpdateConsumerOffset, remoting.QueryConsumerOffset:
		r.needGroup(r.get("consumerGroup"), PermSub)
		r.need(r.get("topic"), PermSub)
	}
}

// signedContent is what the client signed: the values of every field but
// Signature, in key order, then the body. Without the token it leaves
// SecurityToken out, as the official Go client signs.
func (r *request) signedContent(withToken bool) []byte {
	c := r.content[:0]
	for _, f := range r.fields {
		if !withToken && f.key == FieldSecurityToken {
			continue
		}
		c = append(c, f.value...)
	}
	r.content = c
	return c
}

// adminCodes need an account with admin: true. RocketMQ 4.9's set
// (Permission.ADMIN_CODE: create/delete topic, broker config, create/delete
// subscription group) plus what it forgot: the ACL administration itself
// (a non-admin could read every secret, apache/rocketmq#5970, or whitelist
// itself, #8524), offset resets, and the other codes that change a broker's
// data or state for everyone.
var adminCodes = map[remoting.RequestCode]string{
	remoting.UpdateAndCreateTopic:         "UPDATE_AND_CREATE_TOPIC",
	remoting.UpdateBrokerConfig:           "UPDATE_BROKER_CONFIG",
	remoting.DeleteTopicInBroker:          "DELETE_TOPIC_IN_BROKER",
	remoting.UpdateAndCreateSubscription:  "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
	remoting.DeleteSubscriptionGroup:      "DELETE_SUBSCRIPTIONGROUP",
	remoting.UpdateAndCreateACLConfig:     "UPDATE_AND_CREATE_ACL_CONFIG",
	remoting.DeleteACLConfig:              "DELETE_ACL_CONFIG",
	remoting.GetBrokerClusterACLInfo:      "GET_BROKER_CLUSTER_ACL_INFO",
	remoting.UpdateGlobalWhiteAddrsConfig: "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG",
	remoting.GetBrokerClusterACLConfig:    "GET_BROKER_CLUSTER_ACL_CONFIG",
	remoting.InvokeBrokerToResetOffset:    "INVOKE_BROKER_TO_RESET_OFFSET",
	remoting.ResetConsumerOffsetInBroker:  "RESET_CONSUMER_OFFSET_IN_BROKER",
	remoting.TriggerDeleteFiles:           "TRIGGER_DELETE_FILES",
	remoting.WipeWritePermOfBroker:        "WIPE_WRITE_PERM_OF_BROKER",
	remoting.AddWritePermOfBroker:         "ADD_WRITE_PERM_OF_BROKER",
	remoting.CleanExpiredConsumeQueue:     "CLEAN_EXPIRED_CONSUMEQUEUE",
	remoting.CleanUnusedTopic:             "CLEAN_UNUSED_TOPIC",
	remoting.CloneGroupOffset:             "CLONE_GROUP_OFFSET",
	remoting.ResumeCheckHalfMessage:       "RESUME_CHECK_HALF_MESSAGE",
	remoting.UpdateNamesrvConfig:          "UPDATE_NAMESRV_CONFIG",
	remoting.PutKVConfig:                  "PUT_KV_CONFIG",
	remoting.DeleteKVConfig:               "DELETE_KV_CONFIG",
}

// IsAdminCode reports whether requests with code need an admin account.
func IsAdminCode(code remoting.RequestCode) bool {
	_, ok := adminCodes[code]
	return ok
}
