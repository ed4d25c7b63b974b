package capability

import (
	"fmt"
	"reflect"
	"slices"
)

// Embedded returns the non-nil values of every anonymous field of
// interface type T found in v (through structs and pointers to structs,
// at any depth, the embedded values' own fields included), outermost
// first.
func Embedded[T any](v any) []T {
	iface := reflect.TypeFor[T]()
	var out []T
	seen := map[uintptr]bool{}
	var walk func(rv reflect.Value, depth int)
	walk = func(rv reflect.Value, depth int) {
		if depth > 32 {
			return
		}
		for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
			if rv.IsNil() {
				return
			}
			if rv.Kind() == reflect.Pointer {
				if seen[rv.Pointer()] {
					return
				}
				seen[rv.Pointer()] = true
			}
			rv = rv.Elem()
		}
		if rv.Kind() != reflect.Struct {
			return
		}
		t := rv.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.Anonymous {
				continue
			}
			fv := rv.Field(i)
			if f.Type == iface {
				if fv.IsNil() || !fv.CanInterface() {
					continue // reached through an unexported field: not readable
				}
				if s, ok := fv.Interface().(T); ok {
					out = append(out, s)
				}
			}
			walk(fv, depth+1)
		}
	}
	walk(reflect.ValueOf(v), 0)
	return out
}

// Capability is one optional interface of a store interface S, found by
// type assertion: its name, what the broker does without it, and the
// assertion. Packages meta, storage and unacked each list theirs.
type Capability[S any] struct {
	// Name is the interface as Go spells it: "meta.Syncer".
	Name string
	// Without says what the broker does with a store that lacks it.
	Without string
	// Has reports whether s implements it.
	Has func(s S) bool
}

// Is reports whether s implements T: the Has of a Capability of T.
func Is[T, S any](s S) bool { _, ok := any(s).(T); return ok }

// Lacks returns the names of the caps s does not implement.
func Lacks[S any](caps []Capability[S], s S) []string {
	var out []string
	for _, c := range caps {
		if !c.Has(s) {
			out = append(out, c.Name)
		}
	}
	return out
}

// Hidden returns the names of the caps that a store s embeds (an
// anonymous field of type S, at any depth: Embedded) implements and s does
// not: a wrapper written by embedding S forwards S's methods only, so a
// type assertion on it would not find them.
func Hidden[S any](caps []Capability[S], s S) []string {
	var out []string
	for _, c := range caps {
		if c.Has(s) {
			continue
		}
		for _, e := range Embedded[S](s) {
			if c.Has(e) {
				out = append(out, c.Name)
				break
			}
		}
	}
	return out
}

// Pick returns outer as a T when it is one, else inner as a T (setting
// *lost: outer hides it), else T's zero value: what a Wrap keeps of one
// optional interface.
func Pick[T, S any](outer, inner S, lost *bool) T {
	if v, ok := any(outer).(T); ok {
		return v
	}
	v, ok := any(inner).(T)
	if ok {
		*lost = true
	}
	return v
}

// Declared compares what a store s offers with what a conformance suite
// was told it lacks (without, Capability names) and returns each
// disagreement in words, for the suite (named suite; its store package's
// Wrap is wrap) to report: a capability s implements but without names, one
// it lacks that without does not name, and a name in without that caps do
// not have.
func Declared[S any](caps []Capability[S], s S, without []string, suite, wrap string) []string {
	var out []string
	known := make(map[string]bool)
	for _, c := range caps {
		known[c.Name] = true
		declared := !slices.Contains(without, c.Name)
		switch has := c.Has(s); {
		case has && !declared:
			out = append(out, fmt.Sprintf("%T implements %s but the test says Without(%q)", s, c.Name, c.Name))
		case !has && declared:
			out = append(out, fmt.Sprintf("%T does not implement %s (without it %s); if it is not meant to, pass %s.Without(%q) (a wrapper that embeds a store loses it: see %s)",
				s, c.Name, c.Without, suite, c.Name, wrap))
		}
	}
	for _, n := range without {
		if !known[n] {
			out = append(out, fmt.Sprintf("Without(%q): no such capability", n))
		}
	}
	return out
}
