package storage

import (
	"github.com/warrenmq/broker/internal/capability"
)

// Capability is one of a ShardStore's optional interfaces, found by type
// assertion: what the broker does with it, and without it.
type Capability struct {
	// Name is the interface as Go spells it: "storage.MemoryReporter".
	Name string
	// Without says what the broker does with a store that lacks it.
	Without string
	// Has reports whether s implements it.
	Has func(s ShardStore) bool
}

func has[T any](s ShardStore) bool { _, ok := s.(T); return ok }

// Capabilities lists every optional interface of a ShardStore, the table in
// the package documentation. broker.New, storagetest.Run and Wrap go by it.
var Capabilities = []Capability{
	{"storage.MemoryReporter", "the store's message bytes do not count against the memory alarm (a store that keeps messages in the Go heap should implement it)", has[MemoryReporter]},
	{"storage.Syncer", "a durable queue makes each publish batch with a persistent message durable in its Append, one sync per batch", has[Syncer]},
	{"storage.TransientDropper", "a durable queue reads its whole shard at start to find the non-persistent records to drop", has[TransientDropper]},
	{"storage.Purger", "queue.purge reads the ready records to learn their offsets before deleting them", has[Purger]},
}

// Lacks returns the names of the Capabilities s does not implement.
func Lacks(s ShardStore) []string {
	var out []string
	for _, c := range Capabilities {
		if !c.Has(s) {
			out = append(out, c.Name)
		}
	}
	return out
}

// Hidden returns the names of the Capabilities that a store s embeds (an
// anonymous field of type ShardStore, at any depth) implements and s does
// not: a wrapper written by embedding ShardStore forwards ShardStore's methods
// only, so the broker would not see them. Wrap keeps them.
func Hidden(s ShardStore) []string {
	var out []string
	for _, c := range Capabilities {
		if c.Has(s) {
			continue
		}
		for _, e := range capability.Embedded[ShardStore](s) {
			if c.Has(e) {
				out = append(out, c.Name)
				break
			}
		}
	}
	return out
}

// Wrap returns outer with every optional interface of inner that outer
// does not implement itself, forwarded to inner: write a wrapper by
// embedding ShardStore, override the methods it changes (and any optional
// interface it means to change), and return Wrap(wrapper, inner) instead
// of the wrapper. An optional interface outer implements is outer's; one
// neither implements stays absent. When outer lacks nothing inner has,
// Wrap returns outer itself.
func Wrap(outer, inner ShardStore) ShardStore {
	lost := false
	mr := pick[MemoryReporter](outer, inner, &lost)
	sy := pick[Syncer](outer, inner, &lost)
	td := pick[TransientDropper](outer, inner, &lost)
	pu := pick[Purger](outer, inner, &lost)
	if !lost {
		return outer
	}
	return wrapWith(outer, mr, sy, td, pu)
}

// pick returns outer as a T when it is one, else inner as a T (setting
// *lost), else nil.
func pick[T any](outer, inner ShardStore, lost *bool) T {
	if v, ok := outer.(T); ok {
		return v
	}
	v, ok := inner.(T)
	if ok {
		*lost = true
	}
	return v
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
