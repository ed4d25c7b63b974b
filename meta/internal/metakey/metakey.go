package metakey

import "encoding/binary"

// Prefix is the first byte of every metadata key.
const Prefix = 'm'

// Kinds: the byte after Prefix.
const (
	KindVHost   = 'v'
	KindUser    = 'u'
	KindPerm    = 'p'
	KindExch    = 'e'
	KindQueue   = 'q'
	KindCursor  = 'c'
	KindBinding = 'b'
	KindLimit   = 'l'
	KindTopic   = 't'
)

// Kinds of policies and operator policies (meta.Policies).
const (
	KindPolicy   = 'y'
	KindOpPolicy = 'o'
)

// Kinds of runtime and global parameters (meta.Parameters).
const (
	KindParam  = 'r'
	KindGlobal = 'g'
)

// Param is the key of component's parameter name in vhost.
func Param(component, vhost, name string) []byte {
	return append(AppendLP(AppendLP(KindPrefix(KindParam), component), vhost), name...)
}

// ParamPrefix is the start of the keys of component's parameters ("":
// every component's), in vhost when component is not "" and vhost is
// not "" either.
func ParamPrefix(component, vhost string) []byte {
	k := KindPrefix(KindParam)
	if component == "" {
		return k
	}
	k = AppendLP(k, component)
	if vhost == "" {
		return k
	}
	return AppendLP(k, vhost)
}

// Global is a global parameter's key.
func Global(name string) []byte { return append(KindPrefix(KindGlobal), name...) }

// AppendLP appends s with a uvarint length prefix.
func AppendLP(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// KindPrefix is the start of every key of one kind.
func KindPrefix(kind byte) []byte { return []byte{Prefix, kind} }

// VHostPrefix is the start of every key of one kind in one vhost.
func VHostPrefix(kind byte, vhost string) []byte { return AppendLP(KindPrefix(kind), vhost) }

// Name is the key of a named entity (exchange, queue, cursor) in a vhost.
func Name(kind byte, vhost, name string) []byte { return append(VHostPrefix(kind, vhost), name...) }

// VHost is a vhost's key.
func VHost(name string) []byte { return append(KindPrefix(KindVHost), name...) }

// User is a user's key.
func User(name string) []byte { return append(KindPrefix(KindUser), name...) }

// Perm is the key of user's permissions on vhost.
func Perm(user, vhost string) []byte {
	return append(AppendLP(KindPrefix(KindPerm), user), vhost...)
}

// Limit is the key of a vhost's limit called name.
func Limit(vhost, name string) []byte { return Name(KindLimit, vhost, name) }

// Topic is the key of user's topic permission on exchange in vhost.
func Topic(user, vhost, exchange string) []byte {
	return append(AppendLP(AppendLP(KindPrefix(KindTopic), user), vhost), exchange...)
}

// Cursor is the cursor key of queue name in vhost.
func Cursor(vhost, name string) []byte { return Name(KindCursor, vhost, name) }

// Binding is a binding's key: every field of meta.Binding but Durable,
// the contract's binding identity. Arguments come last and unprefixed, so
// nil and empty arguments are the same key.
func Binding(vhost, source, destKind, dest, routingKey string, args []byte) []byte {
	k := VHostPrefix(KindBinding, vhost)
	k = AppendLP(k, source)
	k = AppendLP(k, destKind)
	k = AppendLP(k, dest)
	k = AppendLP(k, routingKey)
	return append(k, args...)
}

// Policy is the key of a policy (operator false) or operator policy.
func Policy(vhost, name string, operator bool) []byte {
	return Name(PolicyKind(operator), vhost, name)
}

// PolicyKind is the kind byte of policies or operator policies.
func PolicyKind(operator bool) byte {
	if operator {
		return KindOpPolicy
	}
	return KindPolicy
}
