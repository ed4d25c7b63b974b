package unacked

import (
	"github.com/warrenmq/broker/internal/capability"
)

// Capability is one of an Index's optional interfaces, found by type
// assertion: its Name as Go spells it, what the broker does Without it,
// and Has, the assertion.
type Capability = capability.Capability[Index]

// Capabilities lists every optional interface of an Index, the table in
// the package documentation. broker.New, indextest.Run and Wrap go by it.
var Capabilities = []Capability{
	{Name: "unacked.Claimer", Without: "shared mode is refused (broker.New fails): brokers racing for one message could both claim it", Has: capability.Is[Claimer, Index]},
}

// Lacks returns the names of the Capabilities s does not implement.
func Lacks(s Index) []string { return capability.Lacks(Capabilities, s) }

// Hidden returns the names of the Capabilities that a store s embeds (an
// anonymous field of type Index, at any depth) implements and s does
// not: a wrapper written by embedding Index forwards Index's methods
// only, so the broker would not see them. Wrap keeps them.
func Hidden(s Index) []string { return capability.Hidden(Capabilities, s) }

// Wrap returns outer with every optional interface of inner that outer
// does not implement itself, forwarded to inner: write a wrapper by
// embedding Index, override the methods it changes (and any optional
// interface it means to change), and return Wrap(wrapper, inner) instead
// of the wrapper. An optional interface outer implements is outer's; one
// neither implements stays absent. When outer lacks nothing inner has,
// Wrap returns outer itself.
func Wrap(outer, inner Index) Index {
	lost := false
	cl := capability.Pick[Claimer](outer, inner, &lost)
	if !lost {
		return outer
	}
	return wrapWith(outer, cl)
}

// wrapWith returns base with each non-nil optional interface beside it,
// one anonymous struct per combination: the combination decides which
// type assertions succeed.
func wrapWith(base Index, cl Claimer) Index {
	mask := 0
	if cl != nil {
		mask |= 1
	}
	switch mask {
	case 0:
		return base
	default:
		return struct {
			Index
			Claimer
		}{base, cl}
	}
}
