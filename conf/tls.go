package conf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// TLSConfig holds RocketMQ's TLS switches (TlsSystemConfig), embedded in the
// nameserver's and the broker's configs. Java reads them from system
// properties (-Dtls.server.mode=...) and from the file tls.config.file
// names; we read them from the server's own config file and then from
// tls.config.file, whose tls.* lines win, as they win over Java's system
// properties.
//
// Where Java fails open we do not: an unknown tls.server.mode is an error,
// not permissive; a client certificate asked for with
// tls.server.need.client.auth is always verified against
// tls.server.trustCertPath (Java's tls.server.authClient=false accepts any).
type TLSConfig struct {
	// TLSServerMode is disabled, permissive (TLS and plain on one port) or
	// enforcing (TLS only). Unset: permissive when a server certificate is
	// configured (tls.server.certPath, or tls.test.mode.enable), which is
	// RocketMQ's default, else disabled.
	TLSServerMode string `mapstructure:"tls.server.mode"`
	// TLSTestModeEnable, with no tls.server.certPath, serves a self-signed
	// certificate made at start, and makes the broker's outgoing calls
	// accept any server certificate. RocketMQ's default is true (and it then
	// ignores the configured files); ours is false.
	TLSTestModeEnable bool `mapstructure:"tls.test.mode.enable"`
	// TLSServerNeedClientAuth is none, optional or require.
	TLSServerNeedClientAuth string `mapstructure:"tls.server.need.client.auth"`
	// TLSServerCertPath and TLSServerKeyPath are the server's certificate
	// chain and key (PEM); TLSServerKeyPassword decrypts an encrypted PKCS#8
	// key.
	TLSServerCertPath    string `mapstructure:"tls.server.certPath"`
	TLSServerKeyPath     string `mapstructure:"tls.server.keyPath"`
	TLSServerKeyPassword string `mapstructure:"tls.server.keyPassword" secret:"true"`
	// TLSServerAuthClient is accepted for compatibility: client certificates
	// are always verified when asked for.
	TLSServerAuthClient bool `mapstructure:"tls.server.authClient"`
	// TLSServerTrustCertPath holds the CA certificates client certificates
	// must chain to (PEM); required with tls.server.need.client.auth.
	TLSServerTrustCertPath string `mapstructure:"tls.server.trustCertPath"`

	// TLSEnable makes the broker's own calls (registration with the
	// nameservers, a slave's metadata sync from its master) use TLS. The
	// nameserver makes no calls; it accepts the client keys and ignores them.
	TLSEnable bool `mapstructure:"tls.enable"`
	// TLSClientCertPath, TLSClientKeyPath and TLSClientKeyPassword are the
	// certificate those calls present to servers that ask for one.
	TLSClientCertPath    string `mapstructure:"tls.client.certPath"`
	TLSClientKeyPath     string `mapstructure:"tls.client.keyPath"`
	TLSClientKeyPassword string `mapstructure:"tls.client.keyPassword" secret:"true"`
	// TLSClientAuthServer verifies the servers' certificate chains (not
	// their names: brokers are dialled by the IP they registered, as Java's
	// client does) against tls.client.trustCertPath, or the system's roots
	// without one. A trust file alone turns verification on too; with
	// neither, as RocketMQ's default, any server certificate is accepted.
	TLSClientAuthServer    bool   `mapstructure:"tls.client.authServer"`
	TLSClientTrustCertPath string `mapstructure:"tls.client.trustCertPath"`

	// TLSConfigFile is a properties file of tls.* keys read after the
	// server's config file (RocketMQ's tls.config.file; unlike RocketMQ,
	// /etc/rocketmq/tls.properties is not read unless named here).
	TLSConfigFile string `mapstructure:"tls.config.file"`
}

// ConnLimitConfig caps the connections a server holds (ours: RocketMQ 4.x
// has no such keys), so one client cannot take every descriptor.
type ConnLimitConfig struct {
	// ServerMaxConnections caps the connections open at once (0: no cap).
	ServerMaxConnections int `mapstructure:"serverMaxConnections"`
	// ServerMaxConnectionsPerAddress caps those from one IP address (0: no cap).
	ServerMaxConnectionsPerAddress int `mapstructure:"serverMaxConnectionsPerAddress"`
}

// DefaultTLSConfig is TLS off, as RocketMQ is without certificates.
func DefaultTLSConfig() TLSConfig {
	return TLSConfig{TLSServerNeedClientAuth: "none"}
}

// DefaultConnLimitConfig is generous: far more than a cluster's clients
// open (one connection per client instance and server), well below the
// descriptors a Go process gets (Go raises the soft limit to the hard one).
func DefaultConnLimitConfig() ConnLimitConfig {
	return ConnLimitConfig{ServerMaxConnections: 65536, ServerMaxConnectionsPerAddress: 4096}
}

// ServerTLSMode is the mode the port runs in (see TLSServerMode). Call it
// on a validated config.
func (c *TLSConfig) ServerTLSMode() remoting.TLSMode {
	if c.TLSServerMode == "" {
		if c.TLSServerCertPath != "" || c.TLSTestModeEnable {
			return remoting.TLSPermissive
		}
		return remoting.TLSDisabled
	}
	m, _ := remoting.ParseTLSMode(c.TLSServerMode)
	return m
}

// ServerTLS returns the port's mode and, unless it is disabled, the
// server's TLS configuration, with the certificate and trust files read.
func (c *TLSConfig) ServerTLS() (remoting.TLSMode, *tls.Config, error) {
	mode := c.ServerTLSMode()
	if mode == remoting.TLSDisabled {
		return mode, nil, nil
	}
	auth, err := remoting.ParseClientAuth(c.TLSServerNeedClientAuth)
	if err != nil {
		return mode, nil, err
	}
	cfg, err := remoting.ServerTLSConfig(remoting.ServerTLSOptions{
		CertPath:      c.TLSServerCertPath,
		KeyPath:       c.TLSServerKeyPath,
		KeyPassword:   c.TLSServerKeyPassword,
		ClientAuth:    auth,
		TrustCertPath: c.TLSServerTrustCertPath,
		SelfSigned:    c.TLSTestModeEnable,
	})
	return mode, cfg, err
}

// ClientTLS returns the configuration of the broker's outgoing TLS, or nil
// when tls.enable is false.
func (c *TLSConfig) ClientTLS() (*tls.Config, error) {
	if !c.TLSEnable {
		return nil, nil
	}
	verify := remoting.VerifyNone
	if !c.TLSTestModeEnable && (c.TLSClientAuthServer || c.TLSClientTrustCertPath != "") {
		verify = remoting.VerifyChain
	}
	return remoting.ClientTLSConfig(remoting.ClientTLSOptions{
		TrustCertPath: c.TLSClientTrustCertPath,
		CertPath:      c.TLSClientCertPath,
		KeyPath:       c.TLSClientKeyPath,
		KeyPassword:   c.TLSClientKeyPassword,
		Verify:        verify,
	})
}

// validate checks the TLS keys' values (the files are read by ServerTLS
// and ClientTLS, when the server starts).
func (c *TLSConfig) validate() error {
	bad := func(key string, v any, why string) error {
		return fmt.Errorf("%w: %s=%v %s", ErrBadValue, key, v, why)
	}
	if c.TLSServerMode != "" {
		if _, err := remoting.ParseTLSMode(c.TLSServerMode); err != nil {
			return bad("tls.server.mode", c.TLSServerMode, "is not disabled, permissive or enforcing")
		}
	}
	auth, err := remoting.ParseClientAuth(c.TLSServerNeedClientAuth)
	if err != nil {
		return bad("tls.server.need.client.auth", c.TLSServerNeedClientAuth, "is not none, optional or require")
	}
	if (c.TLSServerCertPath == "") != (c.TLSServerKeyPath == "") {
		return bad("tls.server.certPath", c.TLSServerCertPath, "and tls.server.keyPath must be set together")
	}
	if (c.TLSClientCertPath == "") != (c.TLSClientKeyPath == "") {
		return bad("tls.client.certPath", c.TLSClientCertPath, "and tls.client.keyPath must be set together")
	}
	if c.ServerTLSMode() == remoting.TLSDisabled {
		return nil
	}
	if c.TLSServerCertPath == "" && !c.TLSTestModeEnable {
		return bad("tls.server.mode", c.TLSServerMode, "needs tls.server.certPath and tls.server.keyPath (or tls.test.mode.enable=true)")
	}
	if auth != remoting.ClientAuthNone && c.TLSServerTrustCertPath == "" {
		return bad("tls.server.need.client.auth", c.TLSServerNeedClientAuth, "needs tls.server.trustCertPath to verify client certificates")
	}
	return nil
}

func (c *ConnLimitConfig) validate() error {
	switch {
	case c.ServerMaxConnections < 0:
		return fmt.Errorf("%w: serverMaxConnections=%d must be 0 (no cap) or more", ErrBadValue, c.ServerMaxConnections)
	case c.ServerMaxConnectionsPerAddress < 0:
		return fmt.Errorf("%w: serverMaxConnectionsPerAddress=%d must be 0 (no cap) or more", ErrBadValue, c.ServerMaxConnectionsPerAddress)
	}
	return nil
}

// tlsFileHolder is a config that names a tls.config.file (Load reads it).
type tlsFileHolder interface {
	tlsFile() string
}

func (c *TLSConfig) tlsFile() string { return c.TLSConfigFile }

// loadTLSFile reads the tls.* keys of the properties file at path into cfg.
// Other keys are logged and skipped: the file is for TLS settings alone, as
// in RocketMQ, and must not change anything else. No path, nothing to read.
func loadTLSFile(path string, cfg any, log logrus.FieldLogger) error {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w tls.config.file %s: %w", ErrRead, path, err)
	}
	props, err := ParseProperties(string(data))
	if err != nil {
		return fmt.Errorf("%w tls.config.file %s: %w", ErrRead, path, err)
	}
	for k, v := range props {
		if !strings.HasPrefix(strings.ToLower(k), "tls.") || strings.EqualFold(k, "tls.config.file") {
			if log != nil {
				log.WithFields(logrus.Fields{"file": path, "key": k}).Warn("ignoring a key other than tls.* in tls.config.file")
			}
			continue
		}
		err := Set(cfg, k, v)
		if errors.Is(err, ErrUnknownKey) {
			if log != nil {
				log.WithFields(logrus.Fields{"file": path, "key": k}).Warn("ignoring unknown config key")
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("tls.config.file %s: %w", path, err)
		}
	}
	return nil
}
