package acl

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/gorocketmq/gorocketmq/remoting"
)

// Why a request is refused. Each is wrapped in an error whose text names
// the account and what was refused; that text is the answer's remark.
var (
	// ErrNoAccessKey means a request without an AccessKey field from an
	// address no globalWhiteRemoteAddresses entry matches.
	ErrNoAccessKey = errors.New("acl: no AccessKey in the request")
	// ErrUnknownAccessKey means an AccessKey no account has.
	ErrUnknownAccessKey = errors.New("acl: unknown AccessKey")
	// ErrBadSignature means a missing Signature or one that does not match
	// the account's SecretKey.
	ErrBadSignature = errors.New("acl: signature check failed")
	// ErrNotAdmin means an admin-only request from an account without
	// admin: true.
	ErrNotAdmin = errors.New("acl: admin account needed")
	// ErrNoPermission means the account lacks the PUB or SUB a topic or
	// group of the request needs, or has DENY there.
	ErrNoPermission = errors.New("acl: no permission")
	// ErrUncheckable means a request whose resources cannot be read for
	// certain: a header field given twice, an unparsable HEART_BEAT body.
	ErrUncheckable = errors.New("acl: request cannot be checked")
)

// check decides one request from remote under r: nil lets it through.
//
// The order is RocketMQ's (PlainPermissionManager.validate): a global
// whitelist hit passes with no further check; then the AccessKey must name
// an account; then the signature must match, unless the account's own
// whiteRemoteAddress matches; a PUB to the trace topic then passes; then
// admin-only codes need admin: true, and every topic and group the request
// touches needs its permission (listed, else the account's default).
//
// One difference: RocketMQ lets an account's whiteRemoteAddress skip the
// permission checks as well, so whiteRemoteAddress: "*" turns the account
// into a password-free administrator. Here the address only stands in for
// the signature.
func (r *Rules) check(remote netip.Addr, req *request) error {
	for i := range r.global {
		if r.global[i].Match(remote) {
			return nil
		}
	}
	if req.accessKey == "" {
		return fmt.Errorf("%w (from %s)", ErrNoAccessKey, addrText(remote))
	}
	a := r.accounts[req.accessKey]
	if a == nil {
		return fmt.Errorf("%w %q", ErrUnknownAccessKey, req.accessKey)
	}
	if req.dupKey != "" {
		return fmt.Errorf("%w: header field %q appears twice", ErrUncheckable, req.dupKey)
	}
	if !a.white.Match(remote) && !a.signatureMatches(req) {
		return fmt.Errorf("%w for AccessKey %q", ErrBadSignature, a.accessKey)
	}
	// The caller is known now: read what the request touches.
	req.addNeeds()
	if req.unreadable != "" {
		return fmt.Errorf("%w: %s", ErrUncheckable, req.unreadable)
	}
	for _, n := range req.needs {
		if n.resource == TraceTopic && n.perm == PermPub {
			return nil
		}
	}
	if name, admin := adminCodes[req.code]; admin && !a.admin {
		return fmt.Errorf("%w: request code %d (%s) needs admin: true, which AccessKey %q has not", ErrNotAdmin, req.code, name, a.accessKey)
	}
	if a.perms == nil && a.admin {
		return nil
	}
	for _, n := range req.needs {
		group := strings.HasPrefix(n.resource, RetryGroupTopicPrefix)
		owned, listed := a.perms[n.resource]
		if !listed {
			owned = a.defTopic
			if group {
				owned = a.defGroup
			}
		}
		if owned.Allows(n.perm) {
			continue
		}
		kind, name := "topic", n.resource
		if group {
			kind, name = "group", strings.TrimPrefix(n.resource, RetryGroupTopicPrefix)
		}
		source := "its default " + kind + " permission"
		if listed {
			source = "its permission on it"
		}
		return fmt.Errorf("%w: AccessKey %q may not %s %s %q (%s is %s)", ErrNoPermission, a.accessKey, n.perm, kind, name, source, owned)
	}
	return nil
}

// signatureMatches recomputes the request's signature with the account's
// SecretKey and compares it in constant time. A request carrying a
// SecurityToken is also accepted signed without it: the official Go client
// sends the token but leaves it out of what it signs, while Java clients
// sign it.
func (a *account) signatureMatches(req *request) bool {
	if req.signature == "" {
		return false
	}
	if a.signatureIs(req, true) {
		return true
	}
	return req.securityToken != "" && a.signatureIs(req, false)
}

func (a *account) signatureIs(req *request, withToken bool) bool {
	m := a.mac()
	m.Write(req.signedContent(withToken))
	m.Write(req.body)
	var enc [28]byte // base64 of 20 bytes, padded
	base64.StdEncoding.Encode(enc[:], m.Sum(req.sum[:0]))
	a.macs.Put(m)
	return len(req.signature) == len(enc) && hmac.Equal(enc[:], []byte(req.signature))
}

// addrText names a peer address in a remark.
func addrText(a netip.Addr) string {
	if !a.IsValid() {
		return "an unknown address"
	}
	return a.String()
}

// Check decides one request from the peer at remote (host:port, as
// remoting.Conn.RemoteAddr gives it) under r: nil lets it through, an error
// wrapping one of ErrNoAccessKey, ErrUnknownAccessKey, ErrBadSignature,
// ErrNotAdmin, ErrNoPermission or ErrUncheckable refuses it.
func (r *Rules) Check(remote string, cmd *remoting.Command) error {
	req := readRequest(cmd)
	err := r.check(peerAddr(remote), req)
	req.put()
	return err
}

// peerAddr parses a host:port (or a bare host); an address that does not
// parse matches no pattern.
func peerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr()
	}
	a, _ := netip.ParseAddr(remote)
	return a
}
