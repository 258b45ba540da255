package broker

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/acl"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// errACLDisabled answers the ACL administration requests of a broker
// without aclEnable.
var errACLDisabled = errors.New("broker: ACL is not enabled on this broker (aclEnable=false)")

// newACL loads the ACL file when aclEnable is set (nil otherwise): the
// server's Authorizer is its Authorize. A missing or broken file fails
// New, as a broker that cannot know its rules must not serve.
func newACL(b *Broker) (*acl.Validator, error) {
	if !b.cfg.AclEnable {
		return nil, nil
	}
	path, err := b.cfg.AclFilePath()
	if err != nil {
		return nil, err
	}
	v, err := acl.NewValidator(acl.Config{Path: path, Logger: b.log})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// innerSigner returns the BeforeRequest hook that signs what the broker
// sends itself (nameserver registrations, a slave's calls to its master)
// with innerClientAuthenticationCredentials, or nil when none are set.
// Replication (store/ha) speaks its own protocol, which has no ACL in
// RocketMQ either; it is not signed.
func innerSigner(text string) (func(string, *remoting.Command), error) {
	cred, err := acl.ParseCredentials(text)
	if err != nil || cred.IsZero() {
		return nil, err
	}
	return func(_ string, req *remoting.Command) { cred.Sign(req) }, nil
}

// registerACLProcessors routes the ACL administration codes. They are
// admin-only (acl.IsAdminCode). On a broker without aclEnable they answer
// that ACL is off.
func (b *Broker) registerACLProcessors() {
	b.server.Handle(remoting.UpdateAndCreateACLConfig, b.pools.Admin, b.processUpdateACLConfig)
	b.server.Handle(remoting.DeleteACLConfig, b.pools.Admin, b.processDeleteACLConfig)
	b.server.Handle(remoting.GetBrokerClusterACLInfo, b.pools.Admin, b.processGetACLVersion)
	b.server.Handle(remoting.UpdateGlobalWhiteAddrsConfig, b.pools.Admin, b.processUpdateGlobalWhiteAddrs)
	b.server.Handle(remoting.GetBrokerClusterACLConfig, b.pools.Admin, b.processGetACLConfig)
}

// aclLog names who changed the ACL file: every change is logged with the
// caller's address and AccessKey.
func (b *Broker) aclLog(c *remoting.Conn, req *remoting.Command) logrus.FieldLogger {
	return b.log.WithFields(logrus.Fields{"peer": c.RemoteAddr(), "callerAccessKey": req.ExtFields[acl.FieldAccessKey], "code": req.Code})
}

// processUpdateACLConfig answers UPDATE_AND_CREATE_ACL_CONFIG: it creates
// or updates an account in the ACL file (written atomically) and in force.
func (b *Broker) processUpdateACLConfig(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	if b.acl == nil {
		return respond(req, remoting.UpdateAndCreateACLConfigFailed, errACLDisabled.Error()), nil
	}
	pc := protocol.PlainAccessConfigFromHeader(req.ExtFields)
	u := acl.AccountUpdate{
		AccessKey:          pc.AccessKey,
		SecretKey:          pc.SecretKey,
		Admin:              pc.Admin,
		WhiteRemoteAddress: pc.WhiteRemoteAddress,
		DefaultTopicPerm:   pc.DefaultTopicPerm,
		DefaultGroupPerm:   pc.DefaultGroupPerm,
	}
	if pc.TopicPerms != nil {
		u.TopicPerms = &pc.TopicPerms
	}
	if pc.GroupPerms != nil {
		u.GroupPerms = &pc.GroupPerms
	}
	log := b.aclLog(c, req).WithField("accessKey", pc.AccessKey)
	if err := b.acl.UpdateAccount(u); err != nil {
		log.WithError(err).Warn("ACL account update refused")
		return respond(req, remoting.UpdateAndCreateACLConfigFailed, err.Error()), nil
	}
	log.Info("ACL account created or updated")
	return respond(req, remoting.Success, ""), nil
}

// processDeleteACLConfig answers DELETE_ACL_CONFIG.
func (b *Broker) processDeleteACLConfig(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	if b.acl == nil {
		return respond(req, remoting.DeleteACLConfigFailed, errACLDisabled.Error()), nil
	}
	ak := strings.TrimSpace(req.ExtFields[protocol.ACLAccessKey])
	log := b.aclLog(c, req).WithField("accessKey", ak)
	if err := b.acl.DeleteAccount(ak); err != nil {
		log.WithError(err).Warn("ACL account delete refused")
		return respond(req, remoting.DeleteACLConfigFailed, err.Error()), nil
	}
	log.Info("ACL account deleted")
	return respond(req, remoting.Success, ""), nil
}

// processUpdateGlobalWhiteAddrs answers UPDATE_GLOBAL_WHITE_ADDRS_CONFIG.
// RocketMQ lets the request name the file to edit (aclFileFullPath); a
// path from the network names nothing here but this broker's own ACL file.
func (b *Broker) processUpdateGlobalWhiteAddrs(c *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	if b.acl == nil {
		return respond(req, remoting.UpdateGlobalWhiteAddrsConfigFailed, errACLDisabled.Error()), nil
	}
	if p := strings.TrimSpace(req.ExtFields[protocol.ACLFileFullPath]); p != "" && filepath.Clean(p) != filepath.Clean(b.acl.Path()) {
		return respond(req, remoting.UpdateGlobalWhiteAddrsConfigFailed,
			"aclFileFullPath may only name this broker's ACL file "+b.acl.Path()), nil
	}
	addrs := protocol.SplitList(req.ExtFields[protocol.ACLGlobalWhiteAddrs])
	log := b.aclLog(c, req).WithField("globalWhiteRemoteAddresses", addrs)
	if err := b.acl.UpdateGlobalWhiteAddrs(addrs); err != nil {
		log.WithError(err).Warn("ACL global whitelist update refused")
		return respond(req, remoting.UpdateGlobalWhiteAddrsConfigFailed, err.Error()), nil
	}
	log.Info("ACL global whitelist updated")
	return respond(req, remoting.Success, ""), nil
}

// processGetACLVersion answers GET_BROKER_CLUSTER_ACL_INFO with the ACL
// file's data version, in the header as RocketMQ does.
func (b *Broker) processGetACLVersion(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	if b.acl == nil {
		return respond(req, remoting.SystemError, errACLDisabled.Error()), nil
	}
	v := b.acl.Rules().Version()
	dv := protocol.DataVersion{Timestamp: v.Timestamp, Counter: v.Counter}
	version, err := json.Marshal(dv)
	if err != nil {
		return nil, err
	}
	all, err := json.Marshal(map[string]protocol.DataVersion{b.acl.Path(): dv})
	if err != nil {
		return nil, err
	}
	h := protocol.ClusterACLVersionInfo{BrokerName: b.cfg.BrokerName, BrokerAddr: b.Addr(), ClusterName: b.cfg.BrokerClusterName,
		Version: string(version), AllACLFileVersion: string(all)}
	resp := respond(req, remoting.Success, "")
	resp.ExtFields = protocol.EncodeHeader(&h, nil)
	return resp, nil
}

// processGetACLConfig answers GET_BROKER_CLUSTER_ACL_CONFIG with the
// accounts (secrets included, as RocketMQ answers; the code is admin-only
// here) and the global whitelist.
func (b *Broker) processGetACLConfig(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
	if b.acl == nil {
		return respond(req, remoting.SystemError, errACLDisabled.Error()), nil
	}
	f := b.acl.Rules().File()
	body := protocol.ACLConfigBody{GlobalWhiteAddrs: append([]string{}, f.GlobalWhiteRemoteAddresses...),
		PlainAccessConfigs: []protocol.PlainAccessConfig{}}
	for _, a := range f.Accounts {
		white := a.WhiteRemoteAddress
		body.PlainAccessConfigs = append(body.PlainAccessConfigs, protocol.PlainAccessConfig{
			AccessKey: a.AccessKey, SecretKey: a.SecretKey, WhiteRemoteAddress: &white, Admin: a.Admin,
			DefaultTopicPerm: a.DefaultTopicPerm, DefaultGroupPerm: a.DefaultGroupPerm,
			TopicPerms: a.TopicPerms, GroupPerms: a.GroupPerms,
		})
	}
	data, err := body.Encode()
	if err != nil {
		return nil, err
	}
	resp := respond(req, remoting.Success, "")
	resp.Body = data
	return resp, nil
}
