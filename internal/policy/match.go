package policy

import (
	"cmp"
	"regexp"
	"slices"
	"strings"

	"github.com/warrenmq/broker/internal/queueargs"
)

// Target is the kind of object a policy may apply to.
type Target uint8

const (
	Exchange Target = 1 << iota
	ClassicQueue
	QuorumQueue
	Stream
)

// targets is what each apply-to value covers (rabbit_policy:matches_type
// and matches_queue_type).
func targets(applyTo string) Target {
	switch applyTo {
	case ApplyExchanges:
		return Exchange
	case ApplyQueues:
		return ClassicQueue | QuorumQueue | Stream
	case ApplyClassic:
		return ClassicQueue
	case ApplyQuorum:
		return QuorumQueue
	case ApplyStreams:
		return Stream
	}
	return Exchange | ClassicQueue | QuorumQueue | Stream
}

// Compiled is a checked policy ready to match: its pattern compiled once
// and its definition parsed.
type Compiled struct {
	Policy
	Operator bool
	Def      Def
	targets  Target
	match    func(string) bool
}

// Compile prepares a policy that passed Check (or Parse) for matching.
func Compile(p Policy, operator bool) (*Compiled, error) {
	m, err := compilePattern(p.Pattern)
	if err != nil {
		return nil, err
	}
	return &Compiled{Policy: p, Operator: operator, Def: parseDef(p.Definition), targets: targets(p.ApplyTo), match: m}, nil
}

// Matches reports whether c applies to an object of kind t named name.
func (c *Compiled) Matches(t Target, name string) bool {
	return c.targets&t != 0 && c.match(name)
}

// compilePattern compiles a policy pattern, matched unanchored as
// RabbitMQ's re:run does. RE2 has no lookahead; a pattern that starts with
// "^(?!X)" and has no other lookaround, the form RabbitMQ's own
// documentation used for years ("^(?!amq\.).*"), is taken as "the name
// does not start with a match of X, and matches the rest".
func compilePattern(p string) (func(string) bool, error) {
	if rest, ok := strings.CutPrefix(p, "^(?!"); ok {
		if end := closingParen(rest); end >= 0 {
			notRe, err := regexp.Compile("^(?:" + rest[:end] + ")")
			if err != nil {
				return nil, err
			}
			re, err := regexp.Compile("^(?:" + rest[end+1:] + ")")
			if err != nil {
				return nil, err
			}
			return func(s string) bool { return !notRe.MatchString(s) && re.MatchString(s) }, nil
		}
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	return re.MatchString, nil
}

// closingParen returns the index of the ')' that closes a group whose
// '(' came just before s, -1 if none.
func closingParen(s string) int {
	depth := 0
	inClass := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
		case c == '(':
			depth++
		case c == ')':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}

// Set is one vhost's policies and operator policies, each list in the
// order matching tries them. It is immutable.
type Set struct {
	policies  []*Compiled
	operators []*Compiled
}

// NewSet builds a set. Each list is sorted by priority, highest first;
// equal priorities by name, so every node picks the same policy where
// RabbitMQ leaves the choice undefined.
func NewSet(cs []*Compiled) *Set {
	s := &Set{}
	for _, c := range cs {
		if c.Operator {
			s.operators = append(s.operators, c)
		} else {
			s.policies = append(s.policies, c)
		}
	}
	order := func(a, b *Compiled) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	}
	slices.SortFunc(s.policies, order)
	slices.SortFunc(s.operators, order)
	return s
}

// Empty reports whether the set has no policy of either kind: objects then
// run with their arguments alone.
func (s *Set) Empty() bool { return s == nil || len(s.policies) == 0 && len(s.operators) == 0 }

// Policies returns the policies (operator false) or operator policies,
// highest priority first.
func (s *Set) Policies(operator bool) []*Compiled {
	if s == nil {
		return nil
	}
	if operator {
		return s.operators
	}
	return s.policies
}

// Match is the policy and operator policy that apply to one object; nil
// for none.
type Match struct {
	Policy, Operator *Compiled
}

// Match returns what applies to the object of kind t named name.
func (s *Set) Match(t Target, name string) Match {
	if s.Empty() {
		return Match{}
	}
	return Match{Policy: first(s.policies, t, name), Operator: first(s.operators, t, name)}
}

func first(cs []*Compiled, t Target, name string) *Compiled {
	for _, c := range cs {
		if c.Matches(t, name) {
			return c
		}
	}
	return nil
}

// Names are the names the management API shows: "" for none.
func (m Match) Names() (policy, operator string) {
	if m.Policy != nil {
		policy = m.Policy.Name
	}
	if m.Operator != nil {
		operator = m.Operator.Name
	}
	return policy, operator
}

// Definition is RabbitMQ's effective_policy_definition: the policy's
// definition with the operator policy's merged in
// (rabbit_policy:merge_operator_definitions): for a key both set, the
// lesser value of message-ttl, expires, max-length, max-length-bytes,
// max-in-memory-length, max-in-memory-bytes and delivery-limit, else the
// operator's. nil when neither applies.
func (m Match) Definition() map[string]any {
	if m.Policy == nil && m.Operator == nil {
		return nil
	}
	out := make(map[string]any)
	if m.Policy != nil {
		for k, v := range m.Policy.Definition {
			out[k] = v
		}
	}
	if m.Operator != nil {
		for k, v := range m.Operator.Definition {
			if pv, ok := out[k]; ok {
				v = queueargs.MergePolicyValue(k, pv, v)
			}
			out[k] = v
		}
	}
	return out
}
