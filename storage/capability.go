package storage

import (
	"github.com/warrenmq/broker/internal/capability"
)

// Capability is one of a ShardStore's optional interfaces, found by type
// assertion: its Name as Go spells it, what the broker does Without it,
// and Has, the assertion.
type Capability = capability.Capability[ShardStore]

// Capabilities lists every optional interface of a ShardStore, the table in
// the package documentation. broker.New, storagetest.Run and Wrap go by it.
var Capabilities = []Capability{
	{Name: "storage.MemoryReporter", Without: "the store's message bytes do not count against the memory alarm (a store that keeps messages in the Go heap should implement it)", Has: capability.Is[MemoryReporter, ShardStore]},
	{Name: "storage.Syncer", Without: "a durable queue makes each publish batch with a persistent message durable in its Append, one sync per batch", Has: capability.Is[Syncer, ShardStore]},
	{Name: "storage.TransientDropper", Without: "a durable queue reads its whole shard at start to find the non-persistent records to drop", Has: capability.Is[TransientDropper, ShardStore]},
	{Name: "storage.Purger", Without: "queue.purge reads the ready records to learn their offsets before deleting them", Has: capability.Is[Purger, ShardStore]},
}

// Lacks returns the names of the Capabilities s does not implement.
func Lacks(s ShardStore) []string { return capability.Lacks(Capabilities, s) }

// Hidden returns the names of the Capabilities that a store s embeds (an
// anonymous field of type ShardStore, at any depth) implements and s does
// not: a wrapper written by embedding ShardStore forwards ShardStore's methods
// only, so the broker would not see them. Wrap keeps them.
func Hidden(s ShardStore) []string { return capability.Hidden(Capabilities, s) }

// Wrap returns outer with every optional interface of inner that outer
// does not implement itself, forwarded to inner: write a wrapper by
// embedding ShardStore, override the methods it changes (and any optional
// interface it means to change), and return Wrap(wrapper, inner) instead
// of the wrapper. An optional interface outer implements is outer's; one
// neither implements stays absent. When outer lacks nothing inner has,
// Wrap returns outer itself.
func Wrap(outer, inner ShardStore) ShardStore {
	lost := false
	mr := capability.Pick[MemoryReporter](outer, inner, &lost)
	sy := capability.Pick[Syncer](outer, inner, &lost)
	td := capability.Pick[TransientDropper](outer, inner, &lost)
	pu := capability.Pick[Purger](outer, inner, &lost)
	if !lost {
		return outer
	}
	return wrapWith(outer, mr, sy, td, pu)
}

// wrapWith returns base with each non-nil optional interface beside it,
// one anonymous struct per combination: the combination decides which
// type assertions succeed.
func wrapWith(base ShardStore, mr MemoryReporter, sy Syncer, td TransientDropper, pu Purger) ShardStore {
	mask := 0
	if mr != nil {
		mask |= 1
	}
	if sy != nil {
		mask |= 2
	}
	if td != nil {
		mask |= 4
	}
	if pu != nil {
		mask |= 8
	}
	switch mask {
	case 0:
		return base
	case 1:
		return struct {
			ShardStore
			MemoryReporter
		}{base, mr}
	case 2:
		return struct {
			ShardStore
			Syncer
		}{base, sy}
	case 3:
		return struct {
			ShardStore
			MemoryReporter
			Syncer
		}{base, mr, sy}
	case 4:
		return struct {
			ShardStore
			TransientDropper
		}{base, td}
	case 5:
		return struct {
			ShardStore
			MemoryReporter
			TransientDropper
		}{base, mr, td}
	case 6:
		return struct {
			ShardStore
			Syncer
			TransientDropper
		}{base, sy, td}
	case 7:
		return struct {
			ShardStore
			MemoryReporter
			Syncer
			TransientDropper
		}{base, mr, sy, td}
	case 8:
		return struct {
			ShardStore
			Purger
		}{base, pu}
	case 9:
		return struct {
			ShardStore
			MemoryReporter
			Purger
		}{base, mr, pu}
	case 10:
		return struct {
			ShardStore
			Syncer
			Purger
		}{base, sy, pu}
	case 11:
		return struct {
			ShardStore
			MemoryReporter
			Syncer
			Purger
		}{base, mr, sy, pu}
	case 12:
		return struct {
			ShardStore
			TransientDropper
			Purger
		}{base, td, pu}
	case 13:
		return struct {
			ShardStore
			MemoryReporter
			TransientDropper
			Purger
		}{base, mr, td, pu}
	case 14:
		return struct {
			ShardStore
			Syncer
			TransientDropper
			Purger
		}{base, sy, td, pu}
	default:
		return struct {
			ShardStore
			MemoryReporter
			Syncer
			TransientDropper
			Purger
		}{base, mr, sy, td, pu}
	}
}
