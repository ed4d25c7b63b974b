package metakey

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/codec"
)

// The layout is on disk: these bytes must never change.
func TestLayoutIsStable(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"vhost", VHost("/"), "mv/"},
		{"user", User("guest"), "muguest"},
		{"perm", Perm("guest", "/"), "mp\x05guest/"},
		{"queue", Name(KindQueue, "/", "jobs"), "mq\x01/jobs"},
		{"limit", Limit("/", "max-queues"), "ml\x01/max-queues"},
		{"topic", Topic("guest", "/", "amq.topic"), "mt\x05guest\x01/amq.topic"},
		{"cursor", Cursor("/", "jobs"), "mc\x01/jobs"},
		{"policy", Policy("/", "cap", false), "my\x01/cap"},
		{"operator policy", Policy("/", "cap", true), "mo\x01/cap"},
		{"binding", Binding("/", "x", "queue", "q", "k", []byte{1}),
			"mb\x01/\x01x\x05queue\x01q\x01k\x01"},
	} {
		require.Equal(t, tc.want, string(tc.got), tc.name)
	}
}

// A name is never a prefix of another's keys: "a" and "ab" in different
// vhosts or as different fields stay apart.
func TestPrefixScansDoNotOverlap(t *testing.T) {
	a, ab := VHostPrefix(KindQueue, "a"), Name(KindQueue, "ab", "x")
	require.False(t, bytes.HasPrefix(ab, a))
	require.True(t, bytes.HasPrefix(Name(KindQueue, "a", "x"), a))
}

// TestPrefixScanBound: a vhost's prefix scan, bounded by codec.Successor,
// reaches its largest names.
func TestPrefixScanBound(t *testing.T) {
	p := VHostPrefix(KindQueue, "/")
	require.Negative(t, bytes.Compare(Name(KindQueue, "/", "\xff\xff"), codec.Successor(p)))
}

// TestKeysAreOneAllocation: every key is built in one allocation of its
// exact size (keys are built on every metadata write and read).
func TestKeysAreOneAllocation(t *testing.T) {
	long := string(make([]byte, 300)) // a two-byte length prefix
	for _, tc := range []struct {
		name string
		key  func() []byte
	}{
		{"name", func() []byte { return Name(KindQueue, long, "jobs") }},
		{"vhost prefix", func() []byte { return VHostPrefix(KindQueue, long) }},
		{"vhost", func() []byte { return VHost(long) }},
		{"user", func() []byte { return User(long) }},
		{"perm", func() []byte { return Perm(long, "/") }},
		{"topic", func() []byte { return Topic("u", long, "amq.topic") }},
		{"param", func() []byte { return Param("shovel", long, "s") }},
		{"global", func() []byte { return Global(long) }},
		{"binding", func() []byte { return Binding("/", "x", "queue", long, "k.#", []byte{1, 2}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.key()
			require.Equal(t, len(k), cap(k), "exact size")
			require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = tc.key() }))
		})
	}
}
