package remoting

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"time"

	"github.com/youmark/pkcs8"
)

// TLSMode is how a server's port treats TLS, as RocketMQ's tls.server.mode.
type TLSMode int

const (
	// TLSDisabled serves plain connections only; a TLS handshake is closed
	// with a log line. The zero value: the gnet path alone, as before TLS.
	TLSDisabled TLSMode = iota
	// TLSPermissive serves plain and TLS connections on one port, told apart
	// by the first byte (0x16 opens a TLS handshake; no plain frame can start
	// with it, since its length would exceed MaxFrameSize).
	TLSPermissive
	// TLSEnforcing serves TLS connections only; a plain frame is dropped with
	// the connection and a log line.
	TLSEnforcing
)

// tlsHandshakeByte is the first byte of a TLS record carrying a handshake
// message (a ClientHello on a new connection).
const tlsHandshakeByte = 0x16

func (m TLSMode) String() string {
	switch m {
	case TLSDisabled:
		return "disabled"
	case TLSPermissive:
		return "permissive"
	case TLSEnforcing:
		return "enforcing"
	}
	return fmt.Sprintf("TLSMode(%d)", int(m))
}

// ErrTLSConfig means TLS settings that cannot work: an unknown mode, a
// missing or unreadable certificate, key or trust file.
var ErrTLSConfig = errors.New("remoting: bad TLS configuration")

// ParseTLSMode reads tls.server.mode (case-insensitive). Unlike RocketMQ's
// TlsMode.parse, which falls back to permissive, an unknown value is an
// error: a typo must not open a port that was meant to be TLS-only.
func ParseTLSMode(s string) (TLSMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "disabled":
		return TLSDisabled, nil
	case "permissive":
		return TLSPermissive, nil
	case "enforcing":
		return TLSEnforcing, nil
	}
	return 0, fmt.Errorf("%w: tls.server.mode %q is not disabled, permissive or enforcing", ErrTLSConfig, s)
}

// ClientAuth is whether a TLS server asks clients for certificates, as
// RocketMQ's tls.server.need.client.auth.
type ClientAuth int

const (
	// ClientAuthNone asks for no client certificate.
	ClientAuthNone ClientAuth = iota
	// ClientAuthOptional asks for one and verifies it if the client sends one.
	ClientAuthOptional
	// ClientAuthRequire refuses a client without a certificate the trust
	// file vouches for.
	ClientAuthRequire
)

// ParseClientAuth reads tls.server.need.client.auth: none, optional or
// require (case-insensitive); empty means none.
func ParseClientAuth(s string) (ClientAuth, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return ClientAuthNone, nil
	case "optional":
		return ClientAuthOptional, nil
	case "require":
		return ClientAuthRequire, nil
	}
	return 0, fmt.Errorf("%w: tls.server.need.client.auth %q is not none, optional or require", ErrTLSConfig, s)
}

// ServerTLSOptions names the files of a server's TLS identity (PEM).
type ServerTLSOptions struct {
	// CertPath is the server's certificate chain, leaf first.
	CertPath string
	// KeyPath is its private key: PKCS#8, PKCS#1 or SEC 1, or PKCS#8
	// encrypted with KeyPassword (what Netty accepts with a password).
	KeyPath     string
	KeyPassword string
	// ClientAuth asks clients for certificates, verified against TrustCertPath.
	ClientAuth ClientAuth
	// TrustCertPath holds the CA certificates client certificates must chain
	// to; required unless ClientAuth is ClientAuthNone.
	TrustCertPath string
	// SelfSigned, with no CertPath, makes a throwaway self-signed certificate
	// at start (RocketMQ's tls.test.mode.enable): traffic is encrypted, but no
	// client can tell this server from another.
	SelfSigned bool
}

// ServerTLSConfig builds the tls.Config of a server from o.
func ServerTLSConfig(o ServerTLSOptions) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case o.CertPath != "" || o.KeyPath != "":
		if o.CertPath == "" || o.KeyPath == "" {
			return nil, fmt.Errorf("%w: tls.server.certPath and tls.server.keyPath go together", ErrTLSConfig)
		}
		cert, err := loadKeyPair(o.CertPath, o.KeyPath, o.KeyPassword)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	case o.SelfSigned:
		cert, err := selfSignedCertificate()
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	default:
		return nil, fmt.Errorf("%w: no server certificate (tls.server.certPath and tls.server.keyPath)", ErrTLSConfig)
	}
	if o.ClientAuth == ClientAuthNone {
		return cfg, nil
	}
	if o.TrustCertPath == "" {
		return nil, fmt.Errorf("%w: tls.server.need.client.auth needs tls.server.trustCertPath to verify client certificates", ErrTLSConfig)
	}
	pool, err := loadCertPool(o.TrustCertPath)
	if err != nil {
		return nil, err
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	if o.ClientAuth == ClientAuthRequire {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ServerVerify is how a TLS client checks the server's certificate.
type ServerVerify int

const (
	// VerifyFull checks the chain against the trusted roots and that the
	// certificate names the host or IP dialled (Go's default).
	VerifyFull ServerVerify = iota
	// VerifyChain checks the chain against the trusted roots only, as
	// RocketMQ's Java client does with tls.client.authServer=true: brokers
	// are dialled by the IP they registered, which certificates often lack.
	VerifyChain
	// VerifyNone accepts any certificate, as the official Go client's
	// WithTls(true) and RocketMQ's default (tls.client.authServer=false):
	// the traffic is encrypted, but the server is not authenticated.
	VerifyNone
)

// ClientTLSOptions configures a client's TLS (our SDK, mqadmin, mqbench and
// a broker's calls to nameservers and its master).
type ClientTLSOptions struct {
	// TrustCertPath holds the CA certificates server certificates must chain
	// to (PEM); empty means the system's roots.
	TrustCertPath string
	// CertPath and KeyPath are the client's certificate and key, for servers
	// that ask for one (tls.server.need.client.auth); KeyPassword decrypts an
	// encrypted PKCS#8 key.
	CertPath    string
	KeyPath     string
	KeyPassword string
	// Verify is how the server's certificate is checked (default VerifyFull).
	Verify ServerVerify
}

// ClientTLSConfig builds the tls.Config of a client from o.
func ClientTLSConfig(o ClientTLSOptions) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CertPath != "" || o.KeyPath != "" {
		if o.CertPath == "" || o.KeyPath == "" {
			return nil, fmt.Errorf("%w: a client certificate needs both its certificate and key file", ErrTLSConfig)
		}
		cert, err := loadKeyPair(o.CertPath, o.KeyPath, o.KeyPassword)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if o.TrustCertPath != "" {
		pool, err := loadCertPool(o.TrustCertPath)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch o.Verify {
	case VerifyFull:
	case VerifyNone:
		cfg.InsecureSkipVerify = true
	case VerifyChain:
		// Go verifies the host name together with the chain; skip both and
		// verify the chain alone once the handshake has the certificates.
		cfg.InsecureSkipVerify = true
		roots := cfg.RootCAs
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("remoting: server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	default:
		return nil, fmt.Errorf("%w: unknown server verification %d", ErrTLSConfig, o.Verify)
	}
	return cfg, nil
}

// loadCertPool reads the PEM certificates of path into a pool.
func loadCertPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: trust file: %w", ErrTLSConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%w: trust file %s holds no PEM certificate", ErrTLSConfig, path)
	}
	return pool, nil
}

// loadKeyPair reads a PEM certificate chain and its key; an encrypted
// PKCS#8 key ("ENCRYPTED PRIVATE KEY") is decrypted with password.
func loadKeyPair(certPath, keyPath, password string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: certificate: %w", ErrTLSConfig, err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: key: %w", ErrTLSConfig, err)
	}
	if block, _ := pem.Decode(keyPEM); block != nil && block.Type == "ENCRYPTED PRIVATE KEY" {
		if password == "" {
			return tls.Certificate{}, fmt.Errorf("%w: key %s is encrypted and no key password is set", ErrTLSConfig, keyPath)
		}
		key, err := pkcs8.ParsePKCS8PrivateKey(block.Bytes, []byte(password))
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("%w: decrypt key %s: %w", ErrTLSConfig, keyPath, err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("%w: key %s: %w", ErrTLSConfig, keyPath, err)
		}
		keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: %s with %s: %w", ErrTLSConfig, certPath, keyPath, err)
	}
	return cert, nil
}

// selfSignedCertificate makes a P-256 certificate for localhost and the
// loopback addresses, valid from an hour ago for a year.
func selfSignedCertificate() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: self-signed key: %w", ErrTLSConfig, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: self-signed serial: %w", ErrTLSConfig, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "gorocketmq self-signed (tls.test.mode.enable)"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: self-signed certificate: %w", ErrTLSConfig, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: crypto.Signer(key)}, nil
}
