package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParse feeds PUT /api/policies bodies to Parse: it must never panic;
// a policy it accepts must compile, match without panicking and merge
// into a queue's settings, and must be accepted again as Check sees it
// (what the store round trip does); a refusal is a *ValidationError.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"pattern":"^q","definition":{"message-ttl":1000,"max-length":5},"priority":1,"apply-to":"queues"}`,
		`{"pattern":"^(?!amq\\.).*","definition":{"dead-letter-exchange":"dlx","overflow":"reject-publish-dlx"}}`,
		`{"pattern":"(","definition":{"max-priority":10},"priority":"x","apply-to":7}`,
		`{"pattern":".","definition":{"delivery-limit":-1,"expires":1,"alternate-exchange":"ae"},"apply-to":"exchanges"}`,
		`{"pattern":".","definition":[]}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(fuzzParseBody)
}

func fuzzParseBody(t *testing.T, body []byte, operator bool) {
	{
		var v struct {
			Pattern    any `json:"pattern"`
			ApplyTo    any `json:"apply-to"`
			Priority   any `json:"priority"`
			Definition any `json:"definition"`
		}
		d := json.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		if d.Decode(&v) != nil {
			return
		}
		p, err := Parse("/", "fuzz", Fields{Pattern: v.Pattern, ApplyTo: v.ApplyTo, Priority: v.Priority, Definition: v.Definition}, operator)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("refusal is not a validation error: %v", err)
			}
			return
		}
		c, err := Compile(p, operator)
		if err != nil {
			t.Fatalf("accepted policy does not compile: %v", err)
		}
		m := NewSet([]*Compiled{c}).Match(ClassicQueue, "q.1")
		_ = m.Definition()
		pd, od := m.Defs()
		_ = Effective(Inputs{Policy: pd, Operator: od})
		raw, err := json.Marshal(p.Definition)
		if err != nil {
			t.Fatalf("definition does not encode: %v", err)
		}
		d = json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var def any
		if err := d.Decode(&def); err != nil {
			t.Fatal(err)
		}
		if _, err := Parse("/", "fuzz", Fields{Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: int64(p.Priority), Definition: def}, operator); err != nil {
			t.Fatalf("stored form refused: %v", err)
		}
	}
}
