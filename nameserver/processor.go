package nameserver

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/conf"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// versionRegisterBrokerBody is MQVersion V3_0_11's ordinal: brokers from this
// version on send a RegisterBrokerBody, older ones a bare TopicConfigSerializeWrapper.
const versionRegisterBrokerBody = 37

// faqSuffix is what RocketMQ appends to TOPIC_NOT_EXIST remarks (FAQUrl.suggestTodo).
const faqSuffix = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."

// updatableConfigKeys are the only keys UPDATE_NAMESRV_CONFIG may change. None
// names a path, a host, a port or anything run as a command
// (CVE-2023-33246 / CVE-2023-37582): kvConfigPath, configStorePath and
// rocketmqHome stay what the operator's file said.
var updatableConfigKeys = map[string]bool{
	"orderMessageEnable":          true,
	"productEnvName":              true,
	"clusterTest":                 true,
	"scanNotActiveBrokerInterval": true,
	"brokerChannelExpiredTime":    true,
}

var productEnvNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// registerProcessors routes every nameserver request code to its processor,
// all on one pool: each is a short critical section on the route table or the
// KV file, and none waits on the network.
func (ns *NameServer) registerProcessors(pool *remoting.Pool) {
	handlers := map[remoting.RequestCode]remoting.ProcessorFunc{
		remoting.RegisterBroker:                ns.registerBroker,
		remoting.UnregisterBroker:              ns.unregisterBroker,
		remoting.GetRouteInfoByTopic:           ns.getRouteInfoByTopic,
		remoting.GetBrokerClusterInfo:          ns.getBrokerClusterInfo,
		remoting.GetAllTopicListFromNameServer: ns.getAllTopicList,
		remoting.GetTopicsByCluster:            ns.getTopicsByCluster,
		remoting.DeleteTopicInNamesrv:          ns.deleteTopicInNamesrv,
		remoting.PutKVConfig:                   ns.putKVConfig,
		remoting.GetKVConfig:                   ns.getKVConfig,
		remoting.DeleteKVConfig:                ns.deleteKVConfig,
		remoting.GetKVListByNamespace:          ns.getKVListByNamespace,
		remoting.QueryDataVersion:              ns.queryDataVersion,
		remoting.WipeWritePermOfBroker:         ns.wipeWritePermOfBroker,
		remoting.AddWritePermOfBroker:          ns.addWritePermOfBroker,
		remoting.GetNamesrvConfig:              ns.getNamesrvConfig,
		remoting.UpdateNamesrvConfig:           ns.updateNamesrvConfig,
	}
	for code, fn := range handlers {
		ns.srv.Handle(code, pool, ns.counted(code, fn))
	}
}

func success(req *remoting.Command) *remoting.Command {
	return remoting.NewResponse(req, remoting.Success, "")
}

func fail(req *remoting.Command, code remoting.ResponseCode, remark string) *remoting.Command {
	return remoting.NewResponse(req, code, remark)
}

// decodeHeader fills h from the request; on error it returns the
// SYSTEM_ERROR response Java gives for a header that does not decode.
func (ns *NameServer) decodeHeader(c *remoting.Conn, req *remoting.Command, h any) *remoting.Command {
	if err := protocol.DecodeHeader(req.ExtFields, h); err != nil {
		ns.log.WithFields(logrus.Fields{"peer": c.RemoteAddr(), "code": req.Code, "reason": err}).Warn("bad request header")
		return fail(req, remoting.SystemError, err.Error())
	}
	return nil
}

// registerBroker answers REGISTER_BROKER. The body is checked against
// bodyCrc32 (when non-zero) before it is parsed; the response tells a slave
// its master and carries the ORDER_TOPIC_CONFIG KV namespace.
func (ns *NameServer) registerBroker(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.RegisterBrokerRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	log := ns.log.WithFields(logrus.Fields{"peer": c.RemoteAddr(), "brokerName": h.BrokerName, "brokerAddr": h.BrokerAddr})
	if h.BodyCrc32 != 0 {
		if got := protocol.BodyCRC32(req.Body); got != h.BodyCrc32 {
			log.WithFields(logrus.Fields{"want": h.BodyCrc32, "got": got}).Warn("register body crc32 mismatch")
			return fail(req, remoting.SystemError, "crc32 not match"), nil
		}
	}
	wrapper := &protocol.TopicConfigSerializeWrapper{}
	var filterServers []string
	if len(req.Body) > 0 {
		if req.Version >= versionRegisterBrokerBody {
			body, err := protocol.DecodeRegisterBrokerBody(req.Body, h.Compressed)
			if err != nil {
				log.WithField("reason", err).Warn("bad register body")
				return fail(req, remoting.SystemError, err.Error()), nil
			}
			wrapper = &body.TopicConfigSerializeWrapper
			filterServers = body.FilterServerList
		} else {
			w, err := protocol.DecodeTopicConfigSerializeWrapper(req.Body)
			if err != nil {
				log.WithField("reason", err).Warn("bad register body")
				return fail(req, remoting.SystemError, err.Error()), nil
			}
			wrapper = w
		}
	}
	res, err := ns.routes.RegisterBroker(RegisterBrokerRequest{
		ClusterName:   h.ClusterName,
		BrokerAddr:    h.BrokerAddr,
		BrokerName:    h.BrokerName,
		BrokerID:      h.BrokerID,
		HaServerAddr:  h.HaServerAddr,
		Topics:        wrapper,
		FilterServers: filterServers,
		ConnID:        c.ID(),
	})
	if err != nil {
		log.WithField("reason", err).Warn("broker registration refused")
		return fail(req, remoting.SystemError, err.Error()), nil
	}
	log.WithField("topics", len(wrapper.TopicConfigTable)).Debug("broker registered")
	resp := success(req)
	resp.ExtFields = protocol.EncodeHeader(&protocol.RegisterBrokerResponseHeader{HaServerAddr: res.HaServerAddr, MasterAddr: res.MasterAddr}, nil)
	if kv, ok := ns.kv.List(protocol.NamespaceOrderTopicConfig); ok {
		body, err := (&protocol.KVTable{Table: kv}).Encode()
		if err != nil {
			return nil, err
		}
		resp.Body = body
	}
	return resp, nil
}

func (ns *NameServer) unregisterBroker(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.UnRegisterBrokerRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	ns.routes.UnregisterBroker(h.ClusterName, h.BrokerAddr, h.BrokerName, h.BrokerID)
	return success(req), nil
}

// getRouteInfoByTopic answers GET_ROUTEINFO_BY_TOPIC with compact JSON and
// quoted brokerAddrs keys, which every client version parses.
func (ns *NameServer) getRouteInfoByTopic(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GetRouteInfoRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	r := ns.routes.PickupTopicRouteData(h.Topic)
	if r == nil {
		return fail(req, remoting.TopicNotExist, "No topic route info in name server for the topic: "+h.Topic+faqSuffix), nil
	}
	if ns.config().OrderMessageEnable {
		r.OrderTopicConf, _ = ns.kv.Get(protocol.NamespaceOrderTopicConfig, h.Topic)
	}
	body, err := r.Encode()
	if err != nil {
		return nil, err
	}
	resp := success(req)
	resp.Body = body
	return resp, nil
}

func (ns *NameServer) getBrokerClusterInfo(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	body, err := ns.routes.ClusterInfo().Encode()
	if err != nil {
		return nil, err
	}
	resp := success(req)
	resp.Body = body
	return resp, nil
}

func topicListResponse(req *remoting.Command, topics []string) (*remoting.Command, error) {
	body, err := (&protocol.TopicList{Topics: topics}).Encode()
	if err != nil {
		return nil, err
	}
	resp := success(req)
	resp.Body = body
	return resp, nil
}

func (ns *NameServer) getAllTopicList(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	return topicListResponse(req, ns.routes.AllTopics())
}

func (ns *NameServer) getTopicsByCluster(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GetTopicsByClusterRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	return topicListResponse(req, ns.routes.TopicsByCluster(h.Cluster))
}

func (ns *NameServer) deleteTopicInNamesrv(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.DeleteTopicFromNamesrvRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	removed := ns.routes.DeleteTopic(h.Topic, h.ClusterName)
	ns.log.WithFields(logrus.Fields{"peer": c.RemoteAddr(), "topic": h.Topic, "cluster": h.ClusterName, "removed": removed}).Info("delete topic")
	return success(req), nil
}

// putKVConfig answers PUT_KV_CONFIG. It blocks on the KV file's fsync: the
// answer is sent only once the change is durable.
func (ns *NameServer) putKVConfig(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.PutKVConfigRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	if err := ns.kv.Put(h.Namespace, h.Key, h.Value); err != nil {
		ns.log.WithFields(logrus.Fields{"peer": c.RemoteAddr(), "reason": err}).Error("put kv config")
		return fail(req, remoting.SystemError, err.Error()), nil
	}
	return success(req), nil
}

func (ns *NameServer) getKVConfig(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GetKVConfigRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	v, ok := ns.kv.Get(h.Namespace, h.Key)
	if !ok {
		return fail(req, remoting.QueryNotFound, "No config item, Namespace: "+h.Namespace+" Key: "+h.Key), nil
	}
	resp := success(req)
	resp.ExtFields = protocol.EncodeHeader(&protocol.GetKVConfigResponseHeader{Value: v}, nil)
	return resp, nil
}

// deleteKVConfig answers DELETE_KV_CONFIG; like putKVConfig it blocks on fsync.
func (ns *NameServer) deleteKVConfig(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.DeleteKVConfigRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	if err := ns.kv.Delete(h.Namespace, h.Key); err != nil {
		ns.log.WithFields(logrus.Fields{"peer": c.RemoteAddr(), "reason": err}).Error("delete kv config")
		return fail(req, remoting.SystemError, err.Error()), nil
	}
	return success(req), nil
}

func (ns *NameServer) getKVListByNamespace(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.GetKVListByNamespaceRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	kv, ok := ns.kv.List(h.Namespace)
	if !ok {
		return fail(req, remoting.QueryNotFound, "No config item, Namespace: "+h.Namespace), nil
	}
	body, err := (&protocol.KVTable{Table: kv}).Encode()
	if err != nil {
		return nil, err
	}
	resp := success(req)
	resp.Body = body
	return resp, nil
}

// queryDataVersion answers QUERY_DATA_VERSION: whether the broker's topic
// table differs from what was last registered. An unchanged answer refreshes
// the broker's liveness, as a registration would.
func (ns *NameServer) queryDataVersion(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.QueryDataVersionRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	dv, err := protocol.DecodeDataVersion(req.Body)
	if err != nil {
		return fail(req, remoting.SystemError, err.Error()), nil
	}
	changed := ns.routes.IsBrokerTopicConfigChanged(h.BrokerAddr, *dv)
	if !changed {
		ns.routes.TouchBroker(h.BrokerAddr)
	}
	resp := success(req)
	resp.ExtFields = protocol.EncodeHeader(&protocol.QueryDataVersionResponseHeader{Changed: changed}, nil)
	if known, ok := ns.routes.BrokerDataVersion(h.BrokerAddr); ok {
		body, err := known.Encode()
		if err != nil {
			return nil, err
		}
		resp.Body = body
	}
	return resp, nil
}

func (ns *NameServer) wipeWritePermOfBroker(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.WipeWritePermOfBrokerRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	n := ns.routes.WipeWritePerm(h.BrokerName)
	ns.log.WithFields(logrus.Fields{"peer": c.RemoteAddr(), "brokerName": h.BrokerName, "topics": n}).Info("wiped write permission")
	resp := success(req)
	resp.ExtFields = protocol.EncodeHeader(&protocol.WipeWritePermOfBrokerResponseHeader{WipeTopicCount: int32(n)}, nil)
	return resp, nil
}

func (ns *NameServer) addWritePermOfBroker(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	var h protocol.AddWritePermOfBrokerRequestHeader
	if resp := ns.decodeHeader(c, req, &h); resp != nil {
		return resp, nil
	}
	n := ns.routes.AddWritePerm(h.BrokerName)
	ns.log.WithFields(logrus.Fields{"peer": c.RemoteAddr(), "brokerName": h.BrokerName, "topics": n}).Info("restored write permission")
	resp := success(req)
	resp.ExtFields = protocol.EncodeHeader(&protocol.AddWritePermOfBrokerResponseHeader{AddTopicCount: int32(n)}, nil)
	return resp, nil
}

// getNamesrvConfig answers GET_NAMESRV_CONFIG with the effective config as a
// properties text, as Java's getAllConfigsFormatString.
func (ns *NameServer) getNamesrvConfig(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	cfg := ns.config()
	resp := success(req)
	resp.Body = []byte(conf.Format(&cfg))
	return resp, nil
}

// ErrConfigKeyNotUpdatable means UPDATE_NAMESRV_CONFIG named a key outside
// the runtime allow-list.
var ErrConfigKeyNotUpdatable = errors.New("nameserver: config key cannot be updated at runtime")

// updateNamesrvConfig answers UPDATE_NAMESRV_CONFIG. The body is a properties
// text. All keys must be in the allow-list and all values valid, or nothing
// changes: keys outside it get NO_PERMISSION, bad values SYSTEM_ERROR, each
// with a remark naming the key. Changes live in memory only; the operator's
// file is never rewritten.
func (ns *NameServer) updateNamesrvConfig(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	log := ns.log.WithField("peer", c.RemoteAddr())
	props, err := conf.ParseProperties(string(req.Body))
	if err != nil {
		return fail(req, remoting.SystemError, "string2Properties error: "+err.Error()), nil
	}
	if len(props) == 0 {
		return success(req), nil
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	ns.cfgMu.Lock()
	defer ns.cfgMu.Unlock()
	next := ns.cfg
	var refused []string
	for _, k := range keys {
		name, known := conf.CanonicalKey(&next, k)
		if !known || !updatableConfigKeys[name] {
			refused = append(refused, k)
		}
	}
	if len(refused) > 0 {
		err := fmt.Errorf("%w: %s (updatable: %s)", ErrConfigKeyNotUpdatable, strings.Join(refused, ", "), strings.Join(updatableKeyList(), ", "))
		log.WithFields(logrus.Fields{"keys": refused}).Warn("refused config update")
		return fail(req, remoting.NoPermission, err.Error()), nil
	}
	for _, k := range keys {
		if err := conf.Set(&next, k, props[k]); err != nil {
			return fail(req, remoting.SystemError, err.Error()), nil
		}
	}
	if !productEnvNamePattern.MatchString(next.ProductEnvName) {
		return fail(req, remoting.SystemError, fmt.Sprintf("%v: productEnvName=%q must be 1-64 letters, digits, '_', '.' or '-'", conf.ErrBadValue, next.ProductEnvName)), nil
	}
	if err := next.Validate(); err != nil {
		return fail(req, remoting.SystemError, err.Error()), nil
	}
	for _, k := range keys {
		name, _ := conf.CanonicalKey(&next, k)
		old, _ := conf.Get(&ns.cfg, name)
		val, _ := conf.Get(&next, name)
		log.WithFields(logrus.Fields{"key": name, "old": old, "new": val}).Info("config updated")
	}
	ns.cfg = next
	ns.kickScan()
	return success(req), nil
}

func updatableKeyList() []string {
	out := make([]string, 0, len(updatableConfigKeys))
	for k := range updatableConfigKeys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
