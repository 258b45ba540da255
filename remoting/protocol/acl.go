package protocol

import (
	"encoding/json"
	"strings"
)

// Header keys of the ACL administration requests and answers
// (CreateAccessConfigRequestHeader, DeleteAccessConfigRequestHeader,
// UpdateGlobalWhiteAddrsConfigRequestHeader, GetBrokerAclConfigResponseHeader).
// UPDATE_AND_CREATE_ACL_CONFIG tells an absent field (leave it as it is)
// from an empty one (clear it), which a typed header cannot, so its fields
// are read and written by key.
const (
	ACLAccessKey          = "accessKey"
	ACLSecretKey          = "secretKey"
	ACLWhiteRemoteAddress = "whiteRemoteAddress"
	ACLAdmin              = "admin"
	ACLDefaultTopicPerm   = "defaultTopicPerm"
	ACLDefaultGroupPerm   = "defaultGroupPerm"
	ACLTopicPerms         = "topicPerms" // comma-joined resource=PERM
	ACLGroupPerms         = "groupPerms" // comma-joined resource=PERM
	ACLGlobalWhiteAddrs   = "globalWhiteAddrs"
	ACLFileFullPath       = "aclFileFullPath"
)

// PlainAccessConfig is one ACL account as the ACL requests carry it
// (PlainAccessConfig.java). In an update, nil pointers and nil lists are
// fields left out: the broker keeps the account's value.
type PlainAccessConfig struct {
	AccessKey          string   `json:"accessKey"`
	SecretKey          string   `json:"secretKey"`
	WhiteRemoteAddress *string  `json:"whiteRemoteAddress,omitempty"`
	Admin              bool     `json:"admin"`
	DefaultTopicPerm   string   `json:"defaultTopicPerm,omitempty"`
	DefaultGroupPerm   string   `json:"defaultGroupPerm,omitempty"`
	TopicPerms         []string `json:"topicPerms"`
	GroupPerms         []string `json:"groupPerms"`
}

// Header renders c as UPDATE_AND_CREATE_ACL_CONFIG's header fields.
func (c *PlainAccessConfig) Header() map[string]string {
	h := map[string]string{ACLAccessKey: c.AccessKey, ACLSecretKey: c.SecretKey, ACLAdmin: boolText(c.Admin)}
	if c.WhiteRemoteAddress != nil {
		h[ACLWhiteRemoteAddress] = *c.WhiteRemoteAddress
	}
	if c.DefaultTopicPerm != "" {
		h[ACLDefaultTopicPerm] = c.DefaultTopicPerm
	}
	if c.DefaultGroupPerm != "" {
		h[ACLDefaultGroupPerm] = c.DefaultGroupPerm
	}
	if c.TopicPerms != nil {
		h[ACLTopicPerms] = strings.Join(c.TopicPerms, ",")
	}
	if c.GroupPerms != nil {
		h[ACLGroupPerms] = strings.Join(c.GroupPerms, ",")
	}
	return h
}

// PlainAccessConfigFromHeader reads UPDATE_AND_CREATE_ACL_CONFIG's header
// fields: absent ones stay nil, admin is false unless "true", the
// permission lists are split on ',' (an empty value is an empty list).
func PlainAccessConfigFromHeader(h map[string]string) PlainAccessConfig {
	c := PlainAccessConfig{
		AccessKey:        strings.TrimSpace(h[ACLAccessKey]),
		SecretKey:        strings.TrimSpace(h[ACLSecretKey]),
		Admin:            strings.EqualFold(strings.TrimSpace(h[ACLAdmin]), "true"),
		DefaultTopicPerm: strings.TrimSpace(h[ACLDefaultTopicPerm]),
		DefaultGroupPerm: strings.TrimSpace(h[ACLDefaultGroupPerm]),
	}
	if v, ok := h[ACLWhiteRemoteAddress]; ok {
		v = strings.TrimSpace(v)
		c.WhiteRemoteAddress = &v
	}
	if v, ok := h[ACLTopicPerms]; ok {
		c.TopicPerms = SplitList(v)
	}
	if v, ok := h[ACLGroupPerms]; ok {
		c.GroupPerms = SplitList(v)
	}
	return c
}

// SplitList splits a comma-joined list (UtilAll.split): blank is an empty
// list, items are trimmed.
func SplitList(s string) []string {
	out := []string{}
	if strings.TrimSpace(s) == "" {
		return out
	}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// ACLConfigBody answers GET_BROKER_CLUSTER_ACL_CONFIG
// (GetBrokerClusterAclConfigResponseBody): the whole ACL file.
type ACLConfigBody struct {
	GlobalWhiteAddrs   []string            `json:"globalWhiteAddrs"`
	PlainAccessConfigs []PlainAccessConfig `json:"plainAccessConfigs"`
}

// Encode renders the body as JSON.
func (b *ACLConfigBody) Encode() ([]byte, error) { return json.Marshal(b) }

// DecodeACLConfigBody parses a GET_BROKER_CLUSTER_ACL_CONFIG body.
func DecodeACLConfigBody(data []byte) (*ACLConfigBody, error) {
	var b ACLConfigBody
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, wrapBody("GetBrokerClusterAclConfigResponseBody", err)
	}
	return &b, nil
}

// ClusterACLVersionInfo is what GET_BROKER_CLUSTER_ACL_INFO answers in its
// header (GetBrokerAclConfigResponseHeader): the broker, the version of its
// ACL file (version) and of each ACL file by path (allAclFileVersion).
type ClusterACLVersionInfo struct {
	BrokerName        string                 `ext:"brokerName,required"`
	BrokerAddr        string                 `ext:"brokerAddr,required"`
	ClusterName       string                 `ext:"clusterName,required"`
	Version           string                 `ext:"version,required"`  // DataVersion JSON
	AllACLFileVersion string                 `ext:"allAclFileVersion"` // JSON {path: DataVersion}
	FileVersions      map[string]DataVersion `ext:"-"`                 // AllACLFileVersion decoded
}
