package capability

import "reflect"

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
