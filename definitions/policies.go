package definitions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/warrenmq/broker/internal/queueargs"
	"github.com/warrenmq/broker/meta"
)

// Policy is a policy as the file's "policies" section carries it (and an
// operator policy, which RabbitMQ exports as a runtime parameter of
// component "operator_policy" in "parameters": see
// OperatorPolicyParameter): meta's, the one Policy type. Definition values
// are JSON's (whole numbers int64 when read by Read).
type Policy = meta.Policy

// policyValue is an operator policy parameter's value. Its definition is
// an object, or a list of [key, value] pairs (the proplist form some
// exporters write).
type policyValue struct {
	Pattern    string          `json:"pattern"`
	ApplyTo    string          `json:"apply-to"`
	Definition json.RawMessage `json:"definition"`
	Priority   int             `json:"priority"`
}

// OperatorPolicyParameter returns p as the "parameters" entry RabbitMQ
// exports an operator policy as.
func OperatorPolicyParameter(p Policy) (Parameter, error) {
	def, err := json.Marshal(p.Definition)
	if err != nil {
		return Parameter{}, err
	}
	value, err := json.Marshal(policyValue{Pattern: p.Pattern, ApplyTo: p.ApplyTo, Definition: def, Priority: p.Priority})
	if err != nil {
		return Parameter{}, err
	}
	return Parameter{VHost: p.VHost, Component: "operator_policy", Name: p.Name, Value: value}, nil
}

// operatorPolicies reads the operator policies among d's parameters;
// others are the rest, for the components that own them.
func operatorPolicies(d *File) (ops []Policy, others []Parameter, problems []string) {
	for _, p := range d.Parameters {
		if p.Component != "operator_policy" {
			others = append(others, p)
			continue
		}
		var v policyValue
		if err := DecodeJSON(bytes.NewReader(p.Value), &v); err != nil {
			problems = append(problems, fmt.Sprintf("operator policy %q in vhost %q: %v", p.Name, p.VHost, err))
			continue
		}
		def, err := decodeDefinition(v.Definition)
		if err != nil {
			problems = append(problems, fmt.Sprintf("operator policy %q in vhost %q: %v", p.Name, p.VHost, err))
			continue
		}
		ops = append(ops, Policy{VHost: p.VHost, Name: p.Name, Pattern: v.Pattern, ApplyTo: v.ApplyTo, Definition: def, Priority: v.Priority})
	}
	return ops, others, problems
}

// decodeDefinition reads a definition written as an object or as a list
// of [key, value] pairs.
func decodeDefinition(raw json.RawMessage) (map[string]any, error) {
	var v any
	if err := DecodeJSON(bytes.NewReader(raw), &v); err != nil {
		return nil, err
	}
	switch d := v.(type) {
	case map[string]any:
		return d, nil
	case []any:
		out := make(map[string]any, len(d))
		for _, e := range d {
			pair, ok := e.([]any)
			if !ok || len(pair) != 2 {
				return nil, fmt.Errorf("definition entry %v is not a [key, value] pair", e)
			}
			k, ok := pair[0].(string)
			if !ok {
				return nil, fmt.Errorf("definition key %v is not a string", pair[0])
			}
			out[k] = pair[1]
		}
		return out, nil
	}
	return nil, fmt.Errorf("definition is neither an object nor a list of pairs")
}

// Legacy keys are RabbitMQ 3.x classic queue mirroring and master
// placement keys, removed in 4.0 (the queue-argument table's Removed
// rows, queueargs.RemovedPolicyKey). Import drops them from the policies
// of a 3.x export: a Warren cluster replicates every durable queue
// anyway, and a policy left with no other key is not imported.

// withoutLegacyKeys returns p without the legacy keys; false when nothing
// is left.
func withoutLegacyKeys(p Policy) (Policy, bool) {
	had := len(p.Definition) > 0
	def := make(map[string]any, len(p.Definition))
	for k, v := range p.Definition {
		if !queueargs.RemovedPolicyKey(k) {
			def[k] = v
		}
	}
	p.Definition = def
	return p, len(def) > 0 || !had
}

// policyProblem trims a policy validation text ("Validation failed",
// blank line, problems) to one line for the joined import error.
func policyProblem(err error) string {
	s := strings.TrimSpace(strings.TrimPrefix(err.Error(), "Validation failed"))
	return strings.ReplaceAll(s, "\n", "; ")
}
