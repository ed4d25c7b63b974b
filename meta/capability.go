package meta

import (
	"github.com/warrenmq/broker/internal/capability"
)

// Capability is one of a Store's optional interfaces, found by type
// assertion: its Name as Go spells it, what the broker does Without it,
// and Has, the assertion.
type Capability = capability.Capability[Store]

// Capabilities lists every optional interface of a Store, the table in
// the package documentation. broker.New, metatest.Run and Wrap go by it.
var Capabilities = []Capability{
	{Name: "meta.ChangeFeed", Without: "the broker is the store's only writer: it does not follow other brokers (no shared mode)", Has: capability.Is[ChangeFeed, Store]},
	{Name: "meta.Records", Without: "in shared mode, a durable delayed exchange holds its messages in the memory of the broker that accepted them (a restart of that broker loses them), a deduplicating exchange keeps a cache per broker and a deduplicating queue is not enforced", Has: capability.Is[Records, Store]},
	{Name: "meta.Replicated", Without: "the management API and metrics report no replication status", Has: capability.Is[Replicated, Store]},
	{Name: "meta.Syncer", Without: "a bulk change (a definitions import) waits for each durable write instead of one sync at its end", Has: capability.Is[Syncer, Store]},
}

// Lacks returns the names of the Capabilities s does not implement.
func Lacks(s Store) []string { return capability.Lacks(Capabilities, s) }

// Hidden returns the names of the Capabilities that a store s embeds (an
// anonymous field of type Store, at any depth) implements and s does not:
// a wrapper written by embedding Store forwards Store's methods only, so
// the broker would not see them. Wrap keeps them.
func Hidden(s Store) []string { return capability.Hidden(Capabilities, s) }

// Wrap returns outer with every optional interface of inner that outer
// does not implement itself, forwarded to inner: write a wrapper by
// embedding Store, override the methods it changes (and any optional
// interface it means to change), and return Wrap(wrapper, inner) instead
// of the wrapper. An optional interface outer implements is outer's; one
// neither implements stays absent. When outer lacks nothing inner has,
// Wrap returns outer itself.
func Wrap(outer, inner Store) Store {
	lost := false
	cf := capability.Pick[ChangeFeed](outer, inner, &lost)
	rs := capability.Pick[Records](outer, inner, &lost)
	rp := capability.Pick[Replicated](outer, inner, &lost)
	sy := capability.Pick[Syncer](outer, inner, &lost)
	if !lost {
		return outer
	}
	return wrapWith(outer, cf, rs, rp, sy)
}

// wrapWith returns base with each non-nil optional interface beside it,
// one anonymous struct per combination: the combination decides which
// type assertions succeed.
func wrapWith(base Store, cf ChangeFeed, rs Records, rp Replicated, sy Syncer) Store {
	mask := 0
	if cf != nil {
		mask |= 1
	}
	if rs != nil {
		mask |= 2
	}
	if rp != nil {
		mask |= 4
	}
	if sy != nil {
		mask |= 8
	}
	switch mask {
	case 0:
		return base
	case 1:
		return struct {
			Store
			ChangeFeed
		}{base, cf}
	case 2:
		return struct {
			Store
			Records
		}{base, rs}
	case 3:
		return struct {
			Store
			ChangeFeed
			Records
		}{base, cf, rs}
	case 4:
		return struct {
			Store
			Replicated
		}{base, rp}
	case 5:
		return struct {
			Store
			ChangeFeed
			Replicated
		}{base, cf, rp}
	case 6:
		return struct {
			Store
			Records
			Replicated
		}{base, rs, rp}
	case 7:
		return struct {
			Store
			ChangeFeed
			Records
			Replicated
		}{base, cf, rs, rp}
	case 8:
		return struct {
			Store
			Syncer
		}{base, sy}
	case 9:
		return struct {
			Store
			ChangeFeed
			Syncer
		}{base, cf, sy}
	case 10:
		return struct {
			Store
			Records
			Syncer
		}{base, rs, sy}
	case 11:
		return struct {
			Store
			ChangeFeed
			Records
			Syncer
		}{base, cf, rs, sy}
	case 12:
		return struct {
			Store
			Replicated
			Syncer
		}{base, rp, sy}
	case 13:
		return struct {
			Store
			ChangeFeed
			Replicated
			Syncer
		}{base, cf, rp, sy}
	case 14:
		return struct {
			Store
			Records
			Replicated
			Syncer
		}{base, rs, rp, sy}
	default:
		return struct {
			Store
			ChangeFeed
			Records
			Replicated
			Syncer
		}{base, cf, rs, rp, sy}
	}
}
