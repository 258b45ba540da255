package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// The ACL administration of RocketMQ 4.x plain ACL: each call acts on the
// ACL file of one broker, which must have aclEnable=true, and needs an
// admin account (WithCredentials) unless the caller's address is in the
// broker's globalWhiteRemoteAddresses.

// UpdateACLConfig creates the account cfg names on the broker at addr, or
// updates it: AccessKey and SecretKey are required, Admin is always set,
// and fields left nil keep their value (UPDATE_AND_CREATE_ACL_CONFIG).
func (a *Admin) UpdateACLConfig(ctx context.Context, addr string, cfg protocol.PlainAccessConfig) error {
	_, err := a.c.invokeOK(ctx, addr, remoting.NewRequest(remoting.UpdateAndCreateACLConfig, cfg.Header(), nil), adminTimeout)
	return err
}

// DeleteACLConfig removes the account with accessKey from the broker at
// addr (DELETE_ACL_CONFIG).
func (a *Admin) DeleteACLConfig(ctx context.Context, addr, accessKey string) error {
	req := remoting.NewRequest(remoting.DeleteACLConfig, map[string]string{protocol.ACLAccessKey: accessKey}, nil)
	_, err := a.c.invokeOK(ctx, addr, req, adminTimeout)
	return err
}

// UpdateGlobalWhiteAddrs replaces the globalWhiteRemoteAddresses of the
// broker at addr (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG). aclFile may name the
// broker's ACL file, as RocketMQ's -p does; empty means that file.
func (a *Admin) UpdateGlobalWhiteAddrs(ctx context.Context, addr string, addrs []string, aclFile string) error {
	h := map[string]string{protocol.ACLGlobalWhiteAddrs: strings.Join(addrs, ",")}
	if aclFile != "" {
		h[protocol.ACLFileFullPath] = aclFile
	}
	_, err := a.c.invokeOK(ctx, addr, remoting.NewRequest(remoting.UpdateGlobalWhiteAddrsConfig, h, nil), adminTimeout)
	return err
}

// ACLConfigVersion returns the version of the ACL file of the broker at
// addr (GET_BROKER_CLUSTER_ACL_INFO).
func (a *Admin) ACLConfigVersion(ctx context.Context, addr string) (*protocol.ClusterACLVersionInfo, error) {
	resp, err := a.call(ctx, addr, remoting.GetBrokerClusterACLInfo, nil, nil)
	if err != nil {
		return nil, err
	}
	var info protocol.ClusterACLVersionInfo
	if err := protocol.DecodeHeader(resp.ExtFields, &info); err != nil {
		return nil, err
	}
	if info.AllACLFileVersion != "" {
		if err := json.Unmarshal([]byte(info.AllACLFileVersion), &info.FileVersions); err != nil {
			return nil, fmt.Errorf("%w: allAclFileVersion: %w", protocol.ErrBadBody, err)
		}
	}
	if len(info.FileVersions) == 0 {
		var v protocol.DataVersion
		if err := json.Unmarshal([]byte(info.Version), &v); err != nil {
			return nil, fmt.Errorf("%w: version: %w", protocol.ErrBadBody, err)
		}
		info.FileVersions = map[string]protocol.DataVersion{"": v}
	}
	return &info, nil
}

// ACLConfig returns the accounts (with their secrets) and the global
// whitelist of the broker at addr (GET_BROKER_CLUSTER_ACL_CONFIG).
func (a *Admin) ACLConfig(ctx context.Context, addr string) (*protocol.ACLConfigBody, error) {
	resp, err := a.call(ctx, addr, remoting.GetBrokerClusterACLConfig, nil, nil)
	if err != nil {
		return nil, err
	}
	return protocol.DecodeACLConfigBody(resp.Body)
}
