package unacked

import (
	"github.com/warrenmq/broker/internal/capability"
)

// Capability is one of an Index's optional interfaces, found by type
// assertion: what the broker does with it, and without it.
type Capability struct {
	// Name is the interface as Go spells it: "unacked.Claimer".
	Name string
	// Without says what the broker does with a store that lacks it.
	Without string
	// Has reports whether s implements it.
	Has func(s Index) bool
}

func has[T any](s Index) bool { _, ok := s.(T); return ok }

// Capabilities lists every optional interface of an Index, the table in
// the package documentation. broker.New, indextest.Run and Wrap go by it.
var Capabilities = []Capability{
	{"unacked.Claimer", "shared mode is refused (broker.New fails): brokers racing for one message could both claim it", has[Claimer]},
}

// Lacks returns the names of the Capabilities s does not implement.
func Lacks(s Index) []string {
	var out []string
	for _, c := range Capabilities {
		if !c.Has(s) {
			out = append(out, c.Name)
		}
	}
	return out
}

// Hidden returns the names of the Capabilities that a store s embeds (an
// anonymous field of type Index, at any depth) implements and s does
// not: a wrapper written by embedding Index forwards Index's methods
// only, so the broker would not see them. Wrap keeps them.
func Hidden(s Index) []string {
	var out []string
	for _, c := range Capabilities {
		if c.Has(s) {
			continue
		}
		for _, e := range capability.Embedded[Index](s) {
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
// embedding Index, override the methods it changes (and any optional
// interface it means to change), and return Wrap(wrapper, inner) instead
// of the wrapper. An optional interface outer implements is outer's; one
// neither implements stays absent. When outer lacks nothing inner has,
// Wrap returns outer itself.
func Wrap(outer, inner Index) Index {
	lost := false
	cl := pick[Claimer](outer, inner, &lost)
	if !lost {
		return outer
	}
	return wrapWith(outer, cl)
}

// pick returns outer as a T when it is one, else inner as a T (setting
// *lost), else nil.
func pick[T any](outer, inner Index, lost *bool) T {
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
