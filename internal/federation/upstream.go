package federation

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/warrenmq/broker/internal/erlterm"
)

// The runtime parameter components this package owns.
const (
	ComponentUpstream    = "federation-upstream"
	ComponentUpstreamSet = "federation-upstream-set"
)

// The policy definition keys that federate an exchange or a queue.
const (
	PolicyUpstream        = "federation-upstream"
	PolicyUpstreamSet     = "federation-upstream-set"
	PolicyUpstreamPattern = "federation-upstream-pattern"
)

// Keys are a policy's federation keys; policy.Parse lets at most one be
// set.
type Keys struct {
	// Upstream is federation-upstream: one upstream's name.
	Upstream string
	// Set is federation-upstream-set: a set's name, or AllUpstreams.
	Set string
	// Pattern is federation-upstream-pattern: a regular expression, and
	// every upstream of the vhost whose name it matches (anywhere in the
	// name, as Erlang's re:run does) is one.
	Pattern string
}

// AllUpstreams is the upstream set name that means every upstream of the
// vhost.
const AllUpstreams = "all"

// Ack modes.
const (
	OnConfirm = "on-confirm"
	OnPublish = "on-publish"
	NoAck     = "no-ack"
)

// Settings are the keys an upstream and an upstream-set element share;
// nil fields are unset (an override that does not override, or a
// default to apply).
type Settings struct {
	URIs                []string
	Exchange            *string
	Queue               *string
	ConsumerTag         *string
	PrefetchCount       *float64
	ReconnectDelay      *float64 // seconds
	MaxHops             *float64
	Expires             *float64 // ms
	MessageTTL          *float64 // ms
	TrustUserID         *bool
	AckMode             *string
	ResourceCleanupMode *string
	BindNowait          *bool
	ChannelUseMode      *string
}

// ValidationError is a parameter RabbitMQ would refuse; Error is its
// text (rabbit_runtime_parameters:format_error): "Validation failed", a
// blank line, then one line per problem (erlterm.ValidationError).
type ValidationError = erlterm.ValidationError

// problem is one {error, Fmt, Args} of rabbit_parameter_validation: fmt
// and args kept apart so problems sort as RabbitMQ's lists:usort sorts
// them (by format string, then arguments).
type problem struct{ fmt, args, text string }

type problems []problem

func (ps *problems) add(format string, args ...any) {
	*ps = append(*ps, problem{fmt: format, args: fmt.Sprint(args...), text: fmt.Sprintf(strings.ReplaceAll(strings.ReplaceAll(format, "~s", "%s"), "~p", "%s"), args...)})
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].fmt != ps[j].fmt {
			return ps[i].fmt < ps[j].fmt
		}
		return ps[i].args < ps[j].args
	})
	out := make([]string, 0, len(ps))
	for i, p := range ps {
		if i > 0 && p.text == ps[i-1].text {
			continue // usort drops equal problems
		}
		out = append(out, p.text)
	}
	return &ValidationError{Problems: out}
}

// key is one constraint of shared_validation, in its order.
type key struct {
	name string
	set  func(s *Settings, name string, v any, ps *problems)
}

func str(dst func(*Settings) **string) func(*Settings, string, any, *problems) {
	return func(s *Settings, name string, v any, ps *problems) {
		x, ok := v.(string)
		if !ok {
			ps.add("~s should be binary, actually was ~p", name, erl(v))
			return
		}
		*dst(s) = &x
	}
}

func num(dst func(*Settings) **float64) func(*Settings, string, any, *problems) {
	return func(s *Settings, name string, v any, ps *problems) {
		f, ok := number(v)
		if !ok {
			ps.add("~s should be a number, actually was ~p", name, erl(v))
			return
		}
		*dst(s) = &f
	}
}

func boolean(dst func(*Settings) **bool) func(*Settings, string, any, *problems) {
	return func(s *Settings, name string, v any, ps *problems) {
		b, ok := v.(bool)
		if !ok {
			ps.add("~s should be boolean, actually was ~p", name, erl(v))
			return
		}
		*dst(s) = &b
	}
}

func enum(dst func(*Settings) **string, options ...string) func(*Settings, string, any, *problems) {
	return func(s *Settings, name string, v any, ps *problems) {
		x, ok := v.(string)
		if !ok {
			ps.add("~s should be binary, actually was ~p", name, erl(v))
			return
		}
		for _, o := range options {
			if o == x {
				*dst(s) = &x
				return
			}
		}
		quoted := make([]string, len(options))
		for i, o := range options {
			quoted[i] = erlBinary(o)
		}
		ps.add("~s should be one of ~p, actually was ~p", name, "["+strings.Join(quoted, ",")+"]", erl(v))
	}
}

// number reads a JSON number.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// shared is rabbit_federation_parameters:shared_validation, in its order.
var shared = []key{
	{"exchange", str(func(s *Settings) **string { return &s.Exchange })},
	{"queue", str(func(s *Settings) **string { return &s.Queue })},
	{"consumer-tag", str(func(s *Settings) **string { return &s.ConsumerTag })},
	{"prefetch-count", num(func(s *Settings) **float64 { return &s.PrefetchCount })},
	{"reconnect-delay", num(func(s *Settings) **float64 { return &s.ReconnectDelay })},
	{"max-hops", num(func(s *Settings) **float64 { return &s.MaxHops })},
	{"expires", num(func(s *Settings) **float64 { return &s.Expires })},
	{"message-ttl", num(func(s *Settings) **float64 { return &s.MessageTTL })},
	{"trust-user-id", boolean(func(s *Settings) **bool { return &s.TrustUserID })},
	{"ack-mode", enum(func(s *Settings) **string { return &s.AckMode }, NoAck, OnPublish, OnConfirm)},
	{"resource-cleanup-mode", enum(func(s *Settings) **string { return &s.ResourceCleanupMode }, "default", "never")},
	{"ha-policy", func(s *Settings, name string, v any, ps *problems) {
		if _, ok := v.(string); !ok {
			ps.add("~s should be binary, actually was ~p", name, erl(v))
		}
	}},
	{"bind-nowait", boolean(func(s *Settings) **bool { return &s.BindNowait })},
	{"channel-use-mode", enum(func(s *Settings) **string { return &s.ChannelUseMode }, "multiple", "single")},
}

// uriKey checks uri (validate_uri): a string or a list of strings, each
// a URI amqp_uri:parse takes.
func uriKey(s *Settings, name string, v any, ps *problems) {
	switch x := v.(type) {
	case string:
		if reason := checkURI(x); reason != "" {
			ps.add("\"~s\" not a valid URI: ~p", x, reason)
			return
		}
		s.URIs = []string{x}
	case []any:
		uris := make([]string, 0, len(x))
		for _, e := range x {
			u, ok := e.(string)
			if !ok {
				ps.add("~s should be binary, actually was ~p", name, erl(e))
				return
			}
			if reason := checkURI(u); reason != "" {
				ps.add("\"~s\" not a valid URI: ~p", u, reason)
				return
			}
			uris = append(uris, u)
		}
		s.URIs = uris
	default:
		ps.add("~s should be list, actually was ~p", name, erl(v))
	}
}

// checkURI returns why amqp_uri:parse would refuse u, "" when it takes
// it: the scheme must be amqp or amqps.
func checkURI(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "{malformed_uri," + erlBinary(u) + "}"
	}
	switch p.Scheme {
	case "amqp", "amqps":
		return ""
	case "":
		return "{unexpected_uri_scheme,\"\"}"
	}
	return "{unexpected_uri_scheme,\"" + p.Scheme + "\"}"
}

// proplist is rabbit_parameter_validation:proplist over an object: each
// constraint in order, then the keys none took as "Unrecognised terms".
func proplist(name string, keys []key, mandatory string, v any, s *Settings, ps *problems) {
	m, ok := v.(map[string]any)
	if !ok {
		ps.add("~s not a list ~p", name, erl(v))
		return
	}
	seen := make(map[string]bool, len(m))
	for _, k := range keys {
		x, ok := m[k.name]
		if !ok {
			if k.name == mandatory {
				ps.add("Key \"~s\" not found in ~s", k.name, name)
			}
			continue
		}
		seen[k.name] = true
		k.set(s, k.name, x, ps)
	}
	var rest []string
	for _, k := range sortedKeys(m) {
		if !seen[k] {
			rest = append(rest, "{"+erlBinary(k)+","+erl(m[k])+"}")
		}
	}
	if len(rest) > 0 {
		ps.add("Unrecognised terms ~p in ~s", "["+strings.Join(rest, ",")+"]", name)
	}
}

// ParseUpstream checks the value of the federation-upstream parameter
// name as RabbitMQ 3.10.8 validates it and returns its settings.
func ParseUpstream(name string, v any) (Settings, error) {
	var s Settings
	var ps problems
	keys := append([]key{{"uri", uriKey}}, shared...)
	proplist(name, keys, "uri", v, &s, &ps)
	if err := ps.err(); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// SetElement is one element of an upstream set: the upstream it names
// and what it overrides.
type SetElement struct {
	Upstream string
	Settings
}

// ParseUpstreamSet checks the value of the federation-upstream-set
// parameter name and returns its elements.
func ParseUpstreamSet(name string, v any) ([]SetElement, error) {
	list, ok := v.([]any)
	if !ok {
		// rabbit_data_coercion:to_proplist over a non-list fails; the
		// parameter is refused with the proplist's text.
		var ps problems
		ps.add("~s not a list ~p", name, erl(v))
		return nil, ps.err()
	}
	var ps problems
	out := make([]SetElement, 0, len(list))
	for _, e := range list {
		var el SetElement
		keys := append([]key{{"upstream", func(s *Settings, n string, v any, ps *problems) {
			x, ok := v.(string)
			if !ok {
				ps.add("~s should be binary, actually was ~p", n, erl(v))
				return
			}
			el.Upstream = x
		}}}, shared...)
		keys = append(keys, key{"uri", uriKey}) // from_upstream_or_set reads an overriding uri
		proplist(name, keys, "upstream", e, &el.Settings, &ps)
		out = append(out, el)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Upstream is one resolved upstream of a federated exchange or queue:
// every setting with the element's override or the upstream's value or
// RabbitMQ's default.
type Upstream struct {
	Name           string
	URIs           []string
	Exchange       string // the upstream exchange (exchange federation)
	Queue          string // the upstream queue (queue federation)
	ConsumerTag    string
	PrefetchCount  int
	ReconnectDelay time.Duration
	MaxHops        int
	Expires        int64 // ms, 0 for none
	MessageTTL     int64 // ms, -1 for none
	TrustUserID    bool
	AckMode        string
	CleanupNever   bool
	// SingleChannel is channel-use-mode single: bindings are made on the
	// channel that consumes, not on a command channel of their own.
	SingleChannel bool
}

// Resolve is from_upstream_or_set: the upstream named up (its settings
// s) as element el overrides it, for the local exchange or queue named
// local.
func Resolve(up string, s Settings, el Settings, local string) Upstream {
	pickS := func(a, b *string, d string) string {
		if a != nil {
			return *a
		}
		if b != nil {
			return *b
		}
		return d
	}
	pickF := func(a, b *float64, d float64) float64 {
		if a != nil {
			return *a
		}
		if b != nil {
			return *b
		}
		return d
	}
	pickB := func(a, b *bool) bool {
		if a != nil {
			return *a
		}
		return b != nil && *b
	}
	u := Upstream{
		Name:           up,
		URIs:           s.URIs,
		Exchange:       pickS(el.Exchange, s.Exchange, local),
		Queue:          pickS(el.Queue, s.Queue, local),
		ConsumerTag:    pickS(el.ConsumerTag, s.ConsumerTag, "federation-link-"+up),
		PrefetchCount:  int(pickF(el.PrefetchCount, s.PrefetchCount, 1000)),
		ReconnectDelay: time.Duration(pickF(el.ReconnectDelay, s.ReconnectDelay, 5) * float64(time.Second)),
		MaxHops:        int(pickF(el.MaxHops, s.MaxHops, 1)),
		Expires:        int64(pickF(el.Expires, s.Expires, 0)),
		MessageTTL:     int64(pickF(el.MessageTTL, s.MessageTTL, -1)),
		TrustUserID:    pickB(el.TrustUserID, s.TrustUserID),
		AckMode:        pickS(el.AckMode, s.AckMode, OnConfirm),
		CleanupNever:   pickS(el.ResourceCleanupMode, s.ResourceCleanupMode, "default") == "never",
		SingleChannel:  pickS(el.ChannelUseMode, s.ChannelUseMode, "multiple") == "single",
	}
	if len(el.URIs) > 0 {
		u.URIs = el.URIs
	}
	return u
}

// Lookup gives the stored upstreams of a vhost by name (nil when absent)
// and the names of all of them, for Upstreams.
type Lookup struct {
	Upstream func(name string) (Settings, bool)
	Set      func(name string) ([]SetElement, bool)
	All      func() []string
}

// Upstreams resolves a policy's federation keys k for the local object
// named local, as rabbit_federation_upstream:upstreams and
// from_set_contents do (RabbitMQ 3.10.8): the upstream k.Upstream, the
// elements of the set k.Set (every upstream for "all"), or the upstreams
// whose names k.Pattern matches, in name order; an element naming an
// upstream that does not exist is skipped, and so is a pattern that does
// not compile (policy.Parse refuses one).
func Upstreams(l Lookup, k Keys, local string) []Upstream {
	var elems []SetElement
	switch {
	case k.Upstream != "":
		elems = []SetElement{{Upstream: k.Upstream}}
	case k.Set == AllUpstreams:
		for _, n := range l.All() {
			elems = append(elems, SetElement{Upstream: n})
		}
	case k.Set != "":
		elems, _ = l.Set(k.Set)
	case k.Pattern != "":
		re, err := regexp.Compile(k.Pattern)
		if err != nil {
			return nil
		}
		for _, n := range l.All() {
			if re.MatchString(n) {
				elems = append(elems, SetElement{Upstream: n})
			}
		}
	}
	var out []Upstream
	for _, el := range elems {
		s, ok := l.Upstream(el.Upstream)
		if !ok {
			continue
		}
		out = append(out, Resolve(el.Upstream, s, el.Settings, local))
	}
	return out
}
