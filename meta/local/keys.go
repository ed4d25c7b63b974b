package local

import (
	"encoding/binary"

	"github.com/warrenmq/broker/meta"
)

// Key kinds: the byte after the 'm' prefix.
const (
	prefix      = 'm'
	kindVersion = '!'
	kindVHost   = 'v'
	kindUser    = 'u'
	kindPerm    = 'p'
	kindExch    = 'e'
	kindQueue   = 'q'
	kindCursor  = 'c'
	kindBinding = 'b'
)

// appendLP appends s with a uvarint length prefix.
func appendLP(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// kindPrefix is the start of every key of one kind.
func kindPrefix(kind byte) []byte { return []byte{prefix, kind} }

// vhostPrefix is the start of every key of one kind in one vhost.
func vhostPrefix(kind byte, vhost string) []byte {
	return appendLP(kindPrefix(kind), vhost)
}

// nameKey is the key of a named entity (exchange, queue, cursor) in a vhost.
func nameKey(kind byte, vhost, name string) []byte {
	return append(vhostPrefix(kind, vhost), name...)
}

func vhostKey(name string) []byte { return append(kindPrefix(kindVHost), name...) }

func userKey(name string) []byte { return append(kindPrefix(kindUser), name...) }

func permKey(user, vhost string) []byte {
	return append(appendLP(kindPrefix(kindPerm), user), vhost...)
}

func cursorKey(q meta.QueueKey) []byte { return nameKey(kindCursor, q.VHost, q.Name) }

// bindingKey holds every field of b but Durable, the contract's binding
// identity. Arguments come last and unprefixed, so nil and empty arguments
// are the same key.
func bindingKey(b meta.Binding) []byte {
	k := vhostPrefix(kindBinding, b.VHost)
	k = appendLP(k, b.Source)
	k = appendLP(k, b.DestinationKind)
	k = appendLP(k, b.Destination)
	k = appendLP(k, b.RoutingKey)
	return append(k, b.Arguments...)
}

// successor returns the smallest key greater than every key starting with p,
// the exclusive upper bound of a prefix scan. p is never all 0xff here: it
// starts with 'm'.
func successor(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
