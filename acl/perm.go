package acl

import "strings"

// Perm is a set of permission bits on a topic or group, RocketMQ's
// Permission byte: DENY overrides everything else.
type Perm uint8

// Permission bits with RocketMQ's values (Permission.java).
const (
	PermDeny Perm = 1 << 0 // DENY
	PermAny  Perm = 1 << 1 // ANY: PUB or SUB, as a need
	PermPub  Perm = 1 << 2 // PUB
	PermSub  Perm = 1 << 3 // SUB
)

// ParsePerm reads a permission as plain_acl.yml spells it: DENY, PUB, SUB,
// PUB|SUB or SUB|PUB, with surrounding spaces ignored. Anything else is not
// a permission (ok false); RocketMQ reads it as DENY, and so do the rules
// built from a file (with a warning).
func ParsePerm(s string) (p Perm, ok bool) {
	switch strings.TrimSpace(s) {
	case "DENY":
		return PermDeny, true
	case "PUB":
		return PermPub, true
	case "SUB":
		return PermSub, true
	case "PUB|SUB", "SUB|PUB":
		return PermPub | PermSub, true
	}
	return PermDeny, false
}

// String spells p as plain_acl.yml does.
func (p Perm) String() string {
	switch {
	case p&PermDeny != 0:
		return "DENY"
	case p&(PermPub|PermSub) == PermPub|PermSub:
		return "PUB|SUB"
	case p&PermPub != 0:
		return "PUB"
	case p&PermSub != 0:
		return "SUB"
	case p&PermAny != 0:
		return "ANY"
	}
	return "DENY"
}

// Allows reports whether an account owning p may do what needs needed
// (Permission.checkPermission): never when p has DENY; for a need of ANY,
// when p has PUB or SUB; otherwise when p has a bit of needed.
func (p Perm) Allows(needed Perm) bool {
	if p&PermDeny != 0 {
		return false
	}
	if needed&PermAny != 0 {
		return p&(PermPub|PermSub) != 0
	}
	return needed&p != 0
}
