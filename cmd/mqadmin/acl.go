package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/gorocketmq/gorocketmq/client"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

// The ACL commands of RocketMQ 4.9's mqadmin (tools/command/acl). Like
// every command here they sign their requests with the account in
// $ROCKETMQ_HOME/conf/tools.yml when that file names one (toolsCredentials):
// on a broker with aclEnable they need an admin account.

// toolsFile is where mqadmin finds its credentials, under ROCKETMQ_HOME
// (MixAll.ACL_CONF_TOOLS_FILE).
const toolsFile = "conf/tools.yml"

// toolsCredentials reads accessKey and secretKey from
// $ROCKETMQ_HOME/conf/tools.yml, as RocketMQ's mqadmin does. No file, or a
// file without both keys, means unsigned requests; a file that does not
// parse is an error (RocketMQ logs it and goes on unsigned, to be refused).
func (e *env) toolsCredentials() (client.Credentials, error) {
	home := e.getenv("ROCKETMQ_HOME")
	if home == "" {
		return client.Credentials{}, nil
	}
	path := filepath.Join(home, toolsFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return client.Credentials{}, nil
	}
	if err != nil {
		return client.Credentials{}, fmt.Errorf("mqadmin: read %s: %w", path, err)
	}
	var f struct {
		AccessKey string `yaml:"accessKey"`
		SecretKey string `yaml:"secretKey"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return client.Credentials{}, fmt.Errorf("mqadmin: %s: %w", path, err)
	}
	f.AccessKey, f.SecretKey = strings.TrimSpace(f.AccessKey), strings.TrimSpace(f.SecretKey)
	if f.AccessKey == "" || f.SecretKey == "" {
		return client.Credentials{}, nil
	}
	return client.Credentials{AccessKey: f.AccessKey, SecretKey: f.SecretKey}, nil
}

var brokerOrCluster = []option{
	{short: "b", long: "brokerAddr", hasArg: true, desc: "update acl config file to which broker"},
	{short: "c", long: "clusterName", hasArg: true, desc: "update acl config file to which cluster"},
}

func updateAclConfigCmd() *command {
	return &command{
		name: "updateAclConfig", desc: "Update acl config yaml file in broker",
		opts: append(append([]option{}, brokerOrCluster...),
			option{short: "a", long: "accessKey", hasArg: true, required: true, desc: "set accessKey in acl config file"},
			option{short: "s", long: "secretKey", hasArg: true, required: true, desc: "set secretKey in acl config file"},
			option{short: "w", long: "whiteRemoteAddress", hasArg: true, desc: "set white ip Address for account in acl config file"},
			option{short: "i", long: "defaultTopicPerm", hasArg: true, desc: "set default topicPerm in acl config file"},
			option{short: "u", long: "defaultGroupPerm", hasArg: true, desc: "set default GroupPerm in acl config file"},
			option{short: "t", long: "topicPerms", hasArg: true, desc: "set topicPerms list,eg: topicA=DENY,topicD=SUB"},
			option{short: "g", long: "groupPerms", hasArg: true, desc: "set groupPerms list,eg: groupD=DENY,groupD=SUB"},
			option{short: "m", long: "admin", hasArg: true, desc: "set admin flag in acl config file"},
		),
		needOneOf: []string{"b", "c"},
		run:       runUpdateAclConfig,
	}
}

func runUpdateAclConfig(e *env) error {
	pc := protocol.PlainAccessConfig{AccessKey: e.vals.get("a"), SecretKey: e.vals.get("s"),
		Admin: strings.EqualFold(e.vals.get("m"), "true"), DefaultTopicPerm: e.vals.get("i"), DefaultGroupPerm: e.vals.get("u")}
	if e.vals.has("w") {
		w := e.vals.get("w")
		pc.WhiteRemoteAddress = &w
	}
	if e.vals.has("t") {
		pc.TopicPerms = strings.Split(e.vals.get("t"), ",")
	}
	if e.vals.has("g") {
		pc.GroupPerms = strings.Split(e.vals.get("g"), ",")
	}
	return forEachACLBroker(e, true, func(a *client.Admin, addr string) error {
		if err := a.UpdateACLConfig(e.ctx, addr, pc); err != nil {
			return err
		}
		e.printf("create or update plain access config to %s success.\n", addr)
		return nil
	}, func() { e.printf("%s\n", describeAccount(&pc)) })
}

// describeAccount prints an account without its secret.
func describeAccount(pc *protocol.PlainAccessConfig) string {
	white := "(unchanged)"
	if pc.WhiteRemoteAddress != nil {
		white = *pc.WhiteRemoteAddress
	}
	list := func(l []string) string {
		if l == nil {
			return "(unchanged)"
		}
		return "[" + strings.Join(l, ", ") + "]"
	}
	or := func(s string) string {
		if s == "" {
			return "(unchanged)"
		}
		return s
	}
	return fmt.Sprintf("PlainAccessConfig{accessKey='%s', whiteRemoteAddress='%s', admin=%t, defaultTopicPerm='%s', defaultGroupPerm='%s', topicPerms=%s, groupPerms=%s}",
		pc.AccessKey, white, pc.Admin, or(pc.DefaultTopicPerm), or(pc.DefaultGroupPerm), list(pc.TopicPerms), list(pc.GroupPerms))
}

func deleteAclConfigCmd() *command {
	return &command{
		name: "deleteAclConfig", aliases: []string{"deleteAccessConfig"}, desc: "Delete Acl Config Account in broker",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "delete acl config account from which broker"},
			{short: "c", long: "clusterName", hasArg: true, desc: "delete acl config account from which cluster"},
			{short: "a", long: "accessKey", hasArg: true, required: true, desc: "set accessKey in acl config file for deleting which account"},
		},
		needOneOf: []string{"b", "c"},
		run: func(e *env) error {
			ak := e.vals.get("a")
			return forEachACLBroker(e, true, func(a *client.Admin, addr string) error {
				if err := a.DeleteACLConfig(e.ctx, addr, ak); err != nil {
					return err
				}
				e.printf("delete plain access config account from %s success.\n", addr)
				return nil
			}, func() { e.printf("account's accesskey is:%s\n", ak) })
		},
	}
}

func updateGlobalWhiteAddrCmd() *command {
	return &command{
		name: "updateGlobalWhiteAddr", desc: "Update global white address for acl Config File in broker",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "update global white address to which broker"},
			{short: "c", long: "clusterName", hasArg: true, desc: "update global white address to which cluster"},
			{short: "g", long: "globalWhiteRemoteAddresses", hasArg: true, required: true, desc: "set globalWhiteRemoteAddress list,eg: 10.10.103.*,192.168.0.*"},
			{short: "p", long: "aclFileFullPath", hasArg: true, desc: "update global white address of specified acl file,eg: /xxx/plain_test.yml"},
		},
		needOneOf: []string{"b", "c"},
		run: func(e *env) error {
			addrs := protocol.SplitList(e.vals.get("g"))
			return forEachACLBroker(e, true, func(a *client.Admin, addr string) error {
				if err := a.UpdateGlobalWhiteAddrs(e.ctx, addr, addrs, e.vals.get("p")); err != nil {
					return err
				}
				e.printf("update global white remote addresses to %s success.\n", addr)
				return nil
			}, nil)
		},
	}
}

func clusterAclConfigVersionCmd() *command {
	return &command{
		name: "clusterAclConfigVersion", desc: "List all of acl config version information in cluster",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "query acl config version for which broker"},
			{short: "c", long: "clusterName", hasArg: true, desc: "query acl config version for specified cluster"},
		},
		needOneOf: []string{"b", "c"},
		run: func(e *env) error {
			if e.vals.has("c") {
				e.printf("%-16s  %-22s  %-22s  %-20s  %-22s  %-22s\n",
					"#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath", "#AclConfigVersionNum", "#AclLastUpdateTime")
			}
			err := forEachACLBroker(e, false, func(a *client.Admin, addr string) error {
				v, err := a.ACLConfigVersion(e.ctx, addr)
				if err != nil {
					return err
				}
				for _, path := range sortedKeys(v.FileVersions) {
					dv := v.FileVersions[path]
					e.printf("%-16s  %-22s  %-22s  %-20s  %-22d  %-22s\n", v.ClusterName, v.BrokerName, v.BrokerAddr, path, dv.Counter,
						time.UnixMilli(dv.Timestamp).Format("2006-01-02 15:04:05"))
				}
				return nil
			}, nil)
			if err != nil {
				return err
			}
			if e.vals.has("b") {
				e.printf("get broker's plain access config version success.\n")
			} else {
				e.printf("get cluster's plain access config version success.\n")
			}
			return nil
		},
	}
}

func getAclConfigCmd() *command {
	return &command{
		name: "getAclConfig", aliases: []string{"getAccessConfigSubCommand"}, desc: "List all of acl config information in cluster",
		opts: []option{
			{short: "b", long: "brokerAddr", hasArg: true, desc: "query acl config version for which broker"},
			{short: "c", long: "clusterName", hasArg: true, desc: "query acl config version for specified cluster"},
		},
		needOneOf: []string{"b", "c"},
		run: func(e *env) error {
			return forEachACLBroker(e, false, func(a *client.Admin, addr string) error {
				cfg, err := a.ACLConfig(e.ctx, addr)
				if err != nil {
					return err
				}
				e.printf("\n%-20s: [%s]\n\naccounts:\n", "globalWhiteRemoteAddresses", strings.Join(cfg.GlobalWhiteAddrs, ", "))
				for _, pc := range cfg.PlainAccessConfigs {
					white := ""
					if pc.WhiteRemoteAddress != nil {
						white = *pc.WhiteRemoteAddress
					}
					list := func(l []string) string {
						if l == nil {
							return ""
						}
						return "[" + strings.Join(l, ", ") + "]"
					}
					for _, kv := range [][2]string{{"accessKey", pc.AccessKey}, {"secretKey", pc.SecretKey}, {"whiteRemoteAddress", white},
						{"admin", fmt.Sprint(pc.Admin)}, {"defaultTopicPerm", pc.DefaultTopicPerm}, {"defaultGroupPerm", pc.DefaultGroupPerm},
						{"topicPerms", list(pc.TopicPerms)}, {"groupPerms", list(pc.GroupPerms)}} {
						e.printf("%-1s %-18s: %s\n", "", kv[0], kv[1])
					}
					e.printf("\n")
				}
				return nil
			}, nil)
		},
	}
}

// forEachACLBroker runs fn on -b's broker, or on every broker of -c's
// cluster (its slaves too when withSlaves: RocketMQ's ACL edits go to
// every copy of the file), then after (may be nil).
func forEachACLBroker(e *env, withSlaves bool, fn func(a *client.Admin, addr string) error, after func()) error {
	a, err := e.Admin()
	if err != nil {
		return err
	}
	addrs, err := targetBrokers(e, a, nil, withSlaves)
	if err != nil {
		return err
	}
	for _, addr := range addrs {
		if err := fn(a, addr); err != nil {
			return err
		}
	}
	if after != nil {
		after()
	}
	return nil
}
