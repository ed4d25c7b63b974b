package queueargs

import (
	"testing"

	"github.com/warrenmq/broker/amqp"
)

// FuzzParse: any table of known arguments and values of any field type
// either parses, and parses the same again, or is refused with an *Error
// naming one of its arguments; Effective under any policy values never
// panics.
func FuzzParse(f *testing.F) {
	f.Add([]byte{9, 2, 2, 4, 1, 0}, "quorum", int64(5))
	f.Add([]byte{9, 3, 13, 1, 14, 0}, "stream", int64(-1))
	f.Add([]byte{0, 0, 1, 0, 6, 1}, "dlx", int64(1<<40))
	f.Fuzz(func(t *testing.T, plan []byte, s string, n int64) {
		values := []any{s, n, int32(n), uint8(n), n > 0, float64(n), nil, []any{s}, amqp.Table{"k": s}, "quorum", "stream", "classic"}
		in := amqp.Table{}
		for i := 0; i+1 < len(plan); i += 2 {
			r := table[int(plan[i])%len(table)]
			if r.Name == "" {
				continue
			}
			in[r.Name] = values[int(plan[i+1])%len(values)]
		}
		a, err := Parse(in)
		if err != nil {
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("refusal is %T, not *Error", err)
			}
			if _, given := in[e.Arg]; !given {
				t.Fatalf("refusal names %q, which the table does not hold", e.Arg)
			}
			return
		}
		b, err := Parse(in)
		if err != nil || a != b {
			t.Fatalf("parse is not stable: %v %+v %+v", err, a, b)
		}
		pol := PolicyValues(map[string]any{"max-length": n, "message-ttl": n, "delivery-limit": n, "overflow": s, "max-age": s, "dead-letter-exchange": s})
		_ = Effective(a, pol, pol)
	})
}
