// Package testcert makes certificate authorities and certificates for tests
// of the TLS paths, written as PEM files under the test's temporary
// directory, so no key or certificate is kept in the repository. Validity
// runs from an hour before the test to a day after it, so no test depends on
// the date it runs.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/youmark/pkcs8"
)

// CA is a certificate authority; CertPath is its certificate (PEM), the
// file servers and clients trust.
type CA struct {
	CertPath string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
}

// Files are a certificate and its private key (PEM).
type Files struct {
	CertPath string
	KeyPath  string
}

// Leaf describes a certificate to issue.
type Leaf struct {
	Name     string   // common name, and the files' base name
	IPs      []net.IP // IP subject alternative names
	DNSNames []string
	// Client makes a client certificate (else a server one).
	Client bool
	// KeyPassword, when set, encrypts the key as PKCS#8 (PBES2, AES-256).
	KeyPassword string
}

var serial atomic.Int64

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcert: CA key: %v", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("testcert: CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testcert: CA certificate: %v", err)
	}
	dir := t.TempDir()
	ca := &CA{cert: cert, key: key, dir: dir, CertPath: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.CertPath, "CERTIFICATE", der)
	return ca
}

// Issue makes a certificate signed by ca.
func (ca *CA) Issue(t testing.TB, l Leaf) Files {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcert: key: %v", err)
	}
	usage := x509.ExtKeyUsageServerAuth
	if l.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: l.Name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  l.IPs,
		DNSNames:     l.DNSNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatalf("testcert: certificate: %v", err)
	}
	f := Files{CertPath: filepath.Join(ca.dir, l.Name+".pem"), KeyPath: filepath.Join(ca.dir, l.Name+"-key.pem")}
	writePEM(t, f.CertPath, "CERTIFICATE", der)
	if l.KeyPassword != "" {
		enc, err := pkcs8.MarshalPrivateKey(key, []byte(l.KeyPassword), nil)
		if err != nil {
			t.Fatalf("testcert: encrypt key: %v", err)
		}
		writePEM(t, f.KeyPath, "ENCRYPTED PRIVATE KEY", enc)
		return f
	}
	plain, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testcert: key: %v", err)
	}
	writePEM(t, f.KeyPath, "PRIVATE KEY", plain)
	return f
}

// Loopback issues a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Loopback(t testing.TB, name string) Files {
	t.Helper()
	return ca.Issue(t, Leaf{Name: name, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"}})
}

// Client issues a client certificate.
func (ca *CA) Client(t testing.TB, name string) Files {
	t.Helper()
	return ca.Issue(t, Leaf{Name: name, Client: true})
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("testcert: %v", err)
	}
}
