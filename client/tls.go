package client

import (
	"crypto/tls"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// TLSOptions configures the client's TLS from files: which servers to
// trust, how to check them, and a client certificate for servers that ask
// for one (tls.server.need.client.auth).
type TLSOptions = remoting.ClientTLSOptions

// Ways to check the servers' certificates (TLSOptions.Verify).
const (
	// VerifyFull checks the chain and that the certificate names the
	// address dialled: brokers are dialled by the IP they registered, so
	// their certificates need it as an IP subject alternative name.
	VerifyFull = remoting.VerifyFull
	// VerifyChain checks the chain only, as RocketMQ's Java client with
	// tls.client.authServer=true.
	VerifyChain = remoting.VerifyChain
	// VerifyNone accepts any certificate, as the official Go client's
	// WithTls(true) does: encrypted, but not authenticated.
	VerifyNone = remoting.VerifyNone
)

// WithTLS makes every connection to nameservers and brokers TLS, as the
// official client's WithTls(true), with the files and checks o names. The
// files are read when the option is applied; an unreadable one fails the
// constructor with ErrBadOption.
func WithTLS(o TLSOptions) Option {
	return func(opts *options) error {
		cfg, err := remoting.ClientTLSConfig(o)
		if err != nil {
			return badOption("tls", err)
		}
		opts.tls = cfg
		return nil
	}
}

// WithTLSConfig makes every connection TLS with cfg as it is (nil: Go's
// defaults, VerifyFull against the system's roots).
func WithTLSConfig(cfg *tls.Config) Option {
	return func(opts *options) error {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		opts.tls = cfg
		return nil
	}
}
