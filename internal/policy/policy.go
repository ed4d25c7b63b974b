package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/warrenmq/broker/internal/erlterm"
	"github.com/warrenmq/broker/internal/queueargs"
	"github.com/warrenmq/broker/meta"
)

// Policy is one policy or operator policy in the shape RabbitMQ's HTTP API
// and definitions file use: the definitions package's, the one Policy
// type. Definition values are JSON's: after Check, whole numbers are
// int64, other numbers float64.
type Policy = meta.Policy

// apply-to values.
const (
	ApplyAll       = "all"
	ApplyExchanges = "exchanges"
	ApplyQueues    = "queues"
	ApplyClassic   = "classic_queues"
	ApplyQuorum    = "quorum_queues"
	ApplyStreams   = "streams"
)

// ValidationError is a policy RabbitMQ would refuse. Error is RabbitMQ's
// text (rabbit_runtime_parameters:format_error): "Validation failed", a
// blank line, then one line per problem (erlterm.ValidationError).
type ValidationError = erlterm.ValidationError

// Fields are a policy's parts as a client sent them (a JSON body decoded
// with UseNumber): any of them may have the wrong type. Parse checks them.
type Fields struct {
	Pattern    any // mandatory: string
	ApplyTo    any // nil means "all"
	Priority   any // nil means 0
	Definition any // mandatory: a JSON object
}

// Parse checks fields the way RabbitMQ 4.x validates a policy (operator
// true: an operator policy) and returns the policy, its definition
// normalised. The error is a *ValidationError listing every problem, in
// RabbitMQ's order (definition, apply-to, pattern, priority).
func Parse(vhost, name string, f Fields, operator bool) (Policy, error) {
	p := Policy{VHost: vhost, Name: name, ApplyTo: ApplyAll}
	var problems []string
	// rabbit_parameter_validation:proplist prepends each constraint's
	// result, so the last constraint's problem is listed first.
	if d, err := parseDefinition(f.Definition, operator); err != "" {
		problems = append(problems, err)
	} else {
		p.Definition = d
	}
	if f.ApplyTo != nil {
		s, ok := f.ApplyTo.(string)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("apply-to should be binary, actually was %s", erl(f.ApplyTo)))
		case validApplyTo(s):
			p.ApplyTo = s
		default:
			problems = append(problems, fmt.Sprintf("apply-to '%s' unrecognised; should be one of: 'queues', 'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'", s))
		}
	}
	switch s, ok := f.Pattern.(string); {
	case f.Pattern == nil:
		problems = append(problems, "Key \"pattern\" not found in "+name)
	case !ok:
		problems = append(problems, fmt.Sprintf("pattern should be a binary but was %s", erl(f.Pattern)))
	default:
		if _, err := compilePattern(s); err != nil {
			problems = append(problems, fmt.Sprintf("pattern should be regular expression but is invalid: %v", err))
		}
		p.Pattern = s
	}
	if f.Priority != nil {
		n, ok := normalize(f.Priority)
		switch v := n.(type) {
		case int64:
			if ok && v >= math.MinInt32 && v <= math.MaxInt32 {
				p.Priority = int(v)
			} else {
				problems = append(problems, fmt.Sprintf("priority should be a number between %d and %d, actually was %d", math.MinInt32, math.MaxInt32, v))
			}
		case float64:
			// RabbitMQ compares any number; Warren keeps integers, so a
			// fraction is truncated as rabbitmqctl's parse does.
			if ok && v >= math.MinInt32 && v <= math.MaxInt32 {
				p.Priority = int(v)
			} else {
				problems = append(problems, fmt.Sprintf("priority should be a number, actually was %s", erl(f.Priority)))
			}
		default:
			problems = append(problems, fmt.Sprintf("priority should be a number, actually was %s", erl(f.Priority)))
		}
	}
	if len(problems) > 0 {
		return Policy{}, &ValidationError{Problems: problems}
	}
	return p, nil
}

// Check validates p (operator: as an operator policy) as Parse does and
// returns it normalised: ApplyTo "" becomes "all", Definition values
// become JSON's types (Go integers int64, floats float64). It is the check
// the Go API and the definitions import use.
func Check(p Policy, operator bool) (Policy, error) {
	f := Fields{Pattern: p.Pattern, Priority: int64(p.Priority)}
	if p.ApplyTo != "" {
		f.ApplyTo = p.ApplyTo
	}
	if p.Definition != nil {
		f.Definition = p.Definition
	}
	return Parse(p.VHost, p.Name, f, operator)
}

func validApplyTo(s string) bool {
	switch s {
	case ApplyAll, ApplyExchanges, ApplyQueues, ApplyClassic, ApplyQuorum, ApplyStreams:
		return true
	}
	return false
}

// parseDefinition checks a definition and returns it normalised, or the
// problem. Keys are checked in sorted order and the first bad value is the
// problem, as RabbitMQ's fold over the definition stops at the first
// error; unknown keys are reported only when every known one is valid.
func parseDefinition(raw any, operator bool) (map[string]any, string) {
	if raw == nil {
		return nil, "Key \"definition\" not found"
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Sprintf("definition must be a dictionary: %s", erl(raw))
	}
	if len(m) == 0 {
		return nil, "no policy provided"
	}
	out := make(map[string]any, len(m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var unknown []string
	for _, k := range keys {
		v, okType := normalize(m[k])
		out[k] = v
		// The keys, their ranges and RabbitMQ's words are the
		// queue-argument table's (rabbit_policies:validate_policy0).
		known, refusal := queueargs.CheckPolicy(k, v, operator)
		if !known {
			unknown = append(unknown, fmt.Sprintf("{%s,%s}", erlString(k), erl(v)))
			continue
		}
		if !okType || refusal != "" {
			return nil, erl(v) + " " + policyRefusal(k)
		}
	}
	if len(unknown) > 0 {
		return nil, "[" + strings.Join(unknown, ",") + "] are not recognised policy settings"
	}
	// rabbit_federation_parameters:validate_policy takes one of its keys
	// at a time.
	n := 0
	for _, k := range []string{"federation-upstream", "federation-upstream-set", "federation-upstream-pattern"} {
		if _, ok := out[k]; ok {
			n++
		}
	}
	if n > 1 {
		return nil, "cannot specify federation-upstream, federation-upstream-set or federation-upstream-pattern together"
	}
	if p, ok := out["federation-upstream-pattern"].(string); ok {
		if _, err := regexp.Compile(p); err != nil {
			return nil, fmt.Sprintf("could not compile pattern %s to a regular expression. Error: %v", p, err)
		}
	}
	return out, ""
}

// policyRefusal is RabbitMQ's words after a bad value of key.
func policyRefusal(key string) string {
	r, _ := queueargs.LookupPolicy(key)
	return r.PolicyRefusal
}

// normalize turns a value into JSON's types: json.Number and Go integers
// into int64 (or float64 when fractional or too large), floats into
// float64, lists and objects element by element. ok is false for a value
// JSON has no type for.
func normalize(v any) (any, bool) {
	switch x := v.(type) {
	case nil, string, bool, int64, float64:
		return x, true
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, true
		}
		f, err := x.Float64()
		return f, err == nil
	case []any:
		out := make([]any, len(x))
		ok := true
		for i, e := range x {
			var eok bool
			out[i], eok = normalize(e)
			ok = ok && eok
		}
		return out, ok
	case map[string]any:
		out := make(map[string]any, len(x))
		ok := true
		for k, e := range x {
			var eok bool
			out[k], eok = normalize(e)
			ok = ok && eok
		}
		return out, ok
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := rv.Uint(); u <= math.MaxInt64 {
			return int64(u), true
		}
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	case reflect.String:
		return rv.String(), true
	case reflect.Bool:
		return rv.Bool(), true
	}
	return v, false
}

// erl formats v as Erlang's ~p prints the term RabbitMQ decoded from the
// same JSON (erlterm.Format): a float64 is a float.
func erl(v any) string { return erlterm.Format(v) }

func erlString(s string) string { return erlterm.Binary(s) }
