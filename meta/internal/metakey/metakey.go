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
	return append(AppendLP(AppendLP(start(KindParam, lpLen(component)+lpLen(vhost)+len(name)), component), vhost), name...)
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
func Global(name string) []byte { return append(start(KindGlobal, len(name)), name...) }

// AppendLP appends s with a uvarint length prefix.
func AppendLP(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// lpLen is how many bytes AppendLP appends for s.
func lpLen(s string) int {
	n := 1
	for x := uint64(len(s)); x >= 0x80; x >>= 7 {
		n++
	}
	return n + len(s)
}

// start is KindPrefix with room for n more bytes, so that a key is one
// allocation: keys are built on every metadata write and read.
func start(kind byte, n int) []byte {
	k := make([]byte, 2, 2+n)
	k[0], k[1] = Prefix, kind
	return k
}

// KindPrefix is the start of every key of one kind.
func KindPrefix(kind byte) []byte { return []byte{Prefix, kind} }

// VHostPrefix is the start of every key of one kind in one vhost.
func VHostPrefix(kind byte, vhost string) []byte { return AppendLP(start(kind, lpLen(vhost)), vhost) }

// Name is the key of a named entity (exchange, queue, cursor) in a vhost.
func Name(kind byte, vhost, name string) []byte {
	return append(AppendLP(start(kind, lpLen(vhost)+len(name)), vhost), name...)
}

// VHost is a vhost's key.
func VHost(name string) []byte { return append(start(KindVHost, len(name)), name...) }

// User is a user's key.
func User(name string) []byte { return append(start(KindUser, len(name)), name...) }

// Perm is the key of user's permissions on vhost.
func Perm(user, vhost string) []byte {
	return append(AppendLP(start(KindPerm, lpLen(user)+len(vhost)), user), vhost...)
}

// Limit is the key of a vhost's limit called name.
func Limit(vhost, name string) []byte { return Name(KindLimit, vhost, name) }

// Topic is the key of user's topic permission on exchange in vhost.
func Topic(user, vhost, exchange string) []byte {
	return append(AppendLP(AppendLP(start(KindTopic, lpLen(user)+lpLen(vhost)+len(exchange)), user), vhost), exchange...)
}

// Cursor is the cursor key of queue name in vhost.
func Cursor(vhost, name string) []byte { return Name(KindCursor, vhost, name) }

// Binding is a binding's key: every field of meta.Binding but Durable,
// the contract's binding identity. Arguments come last and unprefixed, so
// nil and empty arguments are the same key.
func Binding(vhost, source, destKind, dest, routingKey string, args []byte) []byte {
	k := start(KindBinding, lpLen(vhost)+lpLen(source)+lpLen(destKind)+lpLen(dest)+lpLen(routingKey)+len(args))
	k = AppendLP(k, vhost)
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
