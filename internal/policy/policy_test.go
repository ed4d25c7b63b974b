package policy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/queueargs"
)

// decode reads a JSON value as the management API does (numbers kept
// exact).
func decode(t *testing.T, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	return v
}

func TestParseValidation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		operator bool
		f        Fields
		def      string // the definition's JSON
		want     string // the validation text, "" for valid
	}{
		{"every queue key", false, Fields{Pattern: "^q"}, `{"message-ttl":1000,"expires":5000,"max-length":10,"max-length-bytes":100,"overflow":"reject-publish-dlx","delivery-limit":3,"dead-letter-exchange":"dlx","dead-letter-routing-key":"rk","queue-mode":"lazy","queue-version":2,"consumer-timeout":60000}`, ""},
		{"alternate-exchange", false, Fields{Pattern: "."}, `{"alternate-exchange":"ae"}`, ""},
		{"negative delivery-limit is unlimited", false, Fields{Pattern: "."}, `{"delivery-limit":-1}`, ""},
		{"ttl not an integer", false, Fields{Pattern: "."}, `{"message-ttl":"abc"}`, `<<"abc">> is not a valid message TTL`},
		{"ttl negative", false, Fields{Pattern: "."}, `{"message-ttl":-5}`, `-5 is not a valid message TTL`},
		{"ttl float", false, Fields{Pattern: "."}, `{"message-ttl":1.5}`, `1.5 is not a valid message TTL`},
		{"expires zero", false, Fields{Pattern: "."}, `{"expires":0}`, `0 is not a valid queue expiry`},
		{"max-length string", false, Fields{Pattern: "."}, `{"max-length":"10"}`, `<<"10">> is not a valid maximum length`},
		{"max-length-bytes", false, Fields{Pattern: "."}, `{"max-length-bytes":true}`, `true is not a valid maximum length in bytes`},
		{"overflow", false, Fields{Pattern: "."}, `{"overflow":"drop-tail"}`, `<<"drop-tail">> is not a valid overflow value`},
		{"delivery-limit", false, Fields{Pattern: "."}, `{"delivery-limit":"x"}`, `<<"x">> is not a valid delivery limit`},
		{"dlx not a string", false, Fields{Pattern: "."}, `{"dead-letter-exchange":1}`, `1 is not a valid dead letter exchange name`},
		{"dlrk not a string", false, Fields{Pattern: "."}, `{"dead-letter-routing-key":null}`, `null is not a valid dead letter routing key`},
		{"ae not a string", false, Fields{Pattern: "."}, `{"alternate-exchange":[1]}`, `[1] is not a valid alternate exchange name`},
		{"federation-upstream", false, Fields{Pattern: "."}, `{"federation-upstream":"up"}`, ""},
		{"federation-upstream-set all", false, Fields{Pattern: "."}, `{"federation-upstream-set":"all"}`, ""},
		{"federation-upstream not a string", false, Fields{Pattern: "."}, `{"federation-upstream":1}`, `1 is not a valid federation upstream name`},
		{"federation-upstream-set not a string", false, Fields{Pattern: "."}, `{"federation-upstream-set":[]}`, `[] is not a valid federation upstream set name`},
		{"federation keys together", false, Fields{Pattern: "."}, `{"federation-upstream":"a","federation-upstream-set":"b"}`, `cannot specify federation-upstream, federation-upstream-set or federation-upstream-pattern together`},
		{"federation-upstream-pattern", false, Fields{Pattern: "."}, `{"federation-upstream-pattern":"^dc-"}`, ""},
		{"federation-upstream-pattern not a string", false, Fields{Pattern: "."}, `{"federation-upstream-pattern":2}`, `2 is not a valid federation upstream pattern name`},
		{"federation-upstream-pattern does not compile", false, Fields{Pattern: "."}, `{"federation-upstream-pattern":"(dc"}`, "could not compile pattern (dc to a regular expression. Error: error parsing regexp: missing closing ): `(dc`"},
		{"federation pattern and set together", false, Fields{Pattern: "."}, `{"federation-upstream-pattern":"a","federation-upstream-set":"b"}`, `cannot specify federation-upstream, federation-upstream-set or federation-upstream-pattern together`},
		{"federation not for operators", true, Fields{Pattern: "."}, `{"federation-upstream":"a"}`, `[{<<"federation-upstream">>,<<"a">>}] are not recognised policy settings`},
		{"queue-mode", false, Fields{Pattern: "."}, `{"queue-mode":"eager"}`, `<<"eager">> is not a valid queue-mode value`},
		{"queue-version", false, Fields{Pattern: "."}, `{"queue-version":3}`, `3 is not a valid queue-version value`},
		{"consumer-timeout", false, Fields{Pattern: "."}, `{"consumer-timeout":"86400000"}`, `<<"86400000">> is not a valid consumer timeout`},
		// RabbitMQ 3.10.8's set_policy refuses "0D" and "1hh" and takes
		// "300Y" and more digits than 64 bits hold.
		{"max-age zero", false, Fields{Pattern: "."}, `{"max-age":"0D"}`, `<<"0D">> is not a valid max age`},
		{"max-age unit", false, Fields{Pattern: "."}, `{"max-age":"1hh"}`, `<<"1hh">> is not a valid max age`},
		{"max-age past a Duration", false, Fields{Pattern: "."}, `{"max-age":"300Y"}`, ""},
		{"max-age of twenty digits", false, Fields{Pattern: "."}, `{"max-age":"99999999999999999999D"}`, ""},
		{"max-priority is not a policy key", false, Fields{Pattern: "."}, `{"max-priority":10}`, `[{<<"max-priority">>,10}] are not recognised policy settings`},
		{"single-active-consumer is not a policy key", false, Fields{Pattern: "."}, `{"single-active-consumer":true}`, `[{<<"single-active-consumer">>,true}] are not recognised policy settings`},
		{"ha-mode is gone in 4.x", false, Fields{Pattern: "."}, `{"ha-mode":"all","ha-sync-mode":"automatic"}`, `[{<<"ha-mode">>,<<"all">>},{<<"ha-sync-mode">>,<<"automatic">>}] are not recognised policy settings`},
		{"bad value before unknown key", false, Fields{Pattern: "."}, `{"zz":1,"max-length":-1}`, `-1 is not a valid maximum length`},
		{"empty definition", false, Fields{Pattern: "."}, `{}`, `no policy provided`},
		{"definition not an object", false, Fields{Pattern: "."}, `[1,2]`, `definition must be a dictionary: [1,2]`},
		{"operator key", true, Fields{Pattern: "."}, `{"max-length":5,"expires":1000,"message-ttl":10,"delivery-limit":2,"overflow":"reject-publish"}`, ""},
		{"not an operator key", true, Fields{Pattern: "."}, `{"dead-letter-exchange":"x"}`, `[{<<"dead-letter-exchange">>,<<"x">>}] are not recognised policy settings`},
		{"bad apply-to", false, Fields{Pattern: ".", ApplyTo: "topics"}, `{"max-length":1}`, `apply-to 'topics' unrecognised; should be one of: 'queues', 'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'`},
		{"bad pattern", false, Fields{Pattern: "(("}, `{"max-length":1}`, `pattern should be regular expression but is invalid: error parsing regexp: missing closing ): ` + "`((`"},
		{"priority not a number", false, Fields{Pattern: ".", Priority: "high"}, `{"max-length":1}`, `priority should be a number, actually was <<"high">>`},
		{"every problem, RabbitMQ's order", false, Fields{Pattern: 5, ApplyTo: "x", Priority: "p"}, `{"max-length":"1"}`,
			"<<\"1\">> is not a valid maximum length\napply-to 'x' unrecognised; should be one of: 'queues', 'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'\npattern should be a binary but was 5\npriority should be a number, actually was <<\"p\">>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			f.Definition = decode(t, tc.def)
			p, err := Parse("/", "p1", f, tc.operator)
			if tc.want == "" {
				require.NoError(t, err)
				require.Equal(t, "p1", p.Name)
				return
			}
			require.Error(t, err)
			require.Equal(t, "Validation failed\n\n"+tc.want+"\n", err.Error())
		})
	}
}

func TestCheckNormalisesGoValues(t *testing.T) {
	p, err := Check(Policy{Name: "p", Pattern: ".", Definition: map[string]any{"max-length": 5, "message-ttl": uint16(7)}}, false)
	require.NoError(t, err)
	require.Equal(t, ApplyAll, p.ApplyTo)
	require.Equal(t, map[string]any{"max-length": int64(5), "message-ttl": int64(7)}, p.Definition)
}

func compiled(t *testing.T, name, pattern, applyTo string, priority int, operator bool, def map[string]any) *Compiled {
	t.Helper()
	p, err := Check(Policy{VHost: "/", Name: name, Pattern: pattern, ApplyTo: applyTo, Priority: priority, Definition: def}, operator)
	require.NoError(t, err)
	c, err := Compile(p, operator)
	require.NoError(t, err)
	return c
}

func TestMatch(t *testing.T) {
	s := NewSet([]*Compiled{
		compiled(t, "low", ".*", "all", 0, false, map[string]any{"max-length": 1}),
		compiled(t, "high", "^orders", "queues", 10, false, map[string]any{"max-length": 2}),
		compiled(t, "b-tie", "tie", "queues", 5, false, map[string]any{"max-length": 3}),
		compiled(t, "a-tie", "tie", "queues", 5, false, map[string]any{"max-length": 4}),
		compiled(t, "quorum", "^qq", "quorum_queues", 20, false, map[string]any{"max-length": 5}),
		compiled(t, "x", "^ex", "exchanges", 30, false, map[string]any{"alternate-exchange": "ae"}),
		compiled(t, "not-amq", `^(?!amq\.).*log`, "queues", 40, false, map[string]any{"max-length": 6}),
		compiled(t, "op", "orders", "queues", 0, true, map[string]any{"max-length": 7}),
	})
	for _, tc := range []struct {
		target   Target
		name     string
		policy   string
		operator string
	}{
		{ClassicQueue, "orders.eu", "high", "op"},
		{ClassicQueue, "my-orders", "low", "op"}, // unanchored: op matches, high does not
		{ClassicQueue, "tie", "a-tie", ""},       // equal priority: the first name
		{QuorumQueue, "qq.1", "quorum", ""},
		{ClassicQueue, "qq.1", "low", ""}, // quorum_queues only
		{Exchange, "ex.1", "x", ""},
		{Exchange, "orders", "low", ""}, // "queues" policies skip exchanges
		{ClassicQueue, "app.log", "not-amq", ""},
		{ClassicQueue, "amq.gen.log", "low", ""}, // the lookahead excludes it
		{Stream, "orders", "high", "op"},
	} {
		m := s.Match(tc.target, tc.name)
		p, op := m.Names()
		require.Equal(t, tc.policy, p, "%s", tc.name)
		require.Equal(t, tc.operator, op, "%s", tc.name)
	}
	require.Equal(t, Match{}, (*Set)(nil).Match(ClassicQueue, "x"))
}

// TestEffective: for each key, the declared argument, the policy and the
// operator policy combine as RabbitMQ 4.x combines them.
func TestEffective(t *testing.T) {
	args := func(tb queueargs.Args) queueargs.Args { return tb }
	parse := func(tbl map[string]any) queueargs.Args {
		a, err := queueargs.Parse(tbl)
		require.NoError(t, err)
		return a
	}
	def := func(m map[string]any) *Def {
		if m == nil {
			return nil
		}
		d := parseDef(normalizeMap(m))
		return &d
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		args     map[string]any
		policy   map[string]any
		operator map[string]any
		check    func(t *testing.T, a queueargs.Args)
	}{
		{"ttl from policy", nil, map[string]any{"message-ttl": 100}, nil, func(t *testing.T, a queueargs.Args) {
			require.True(t, a.HasMessageTTL)
			require.Equal(t, 100*ms, a.MessageTTL)
		}},
		{"ttl: lesser of argument and policy", map[string]any{"x-message-ttl": int32(50)}, map[string]any{"message-ttl": 100}, nil, func(t *testing.T, a queueargs.Args) {
			require.Equal(t, 50*ms, a.MessageTTL)
		}},
		{"ttl: operator lower", map[string]any{"x-message-ttl": int32(50)}, map[string]any{"message-ttl": 100}, map[string]any{"message-ttl": 20}, func(t *testing.T, a queueargs.Args) {
			require.Equal(t, 20*ms, a.MessageTTL)
		}},
		{"expires: lesser", map[string]any{"x-expires": int32(5000)}, map[string]any{"expires": 9000}, map[string]any{"expires": 7000}, func(t *testing.T, a queueargs.Args) {
			require.Equal(t, 5000*ms, a.Expires)
		}},
		{"expires from operator", nil, nil, map[string]any{"expires": 7000}, func(t *testing.T, a queueargs.Args) {
			require.Equal(t, 7000*ms, a.Expires)
		}},
		{"max-length: lesser of argument and policy", map[string]any{"x-max-length": int32(10)}, map[string]any{"max-length": 3}, nil, func(t *testing.T, a queueargs.Args) {
			require.EqualValues(t, 3, a.MaxLength)
		}},
		{"max-length: argument lower", map[string]any{"x-max-length": int32(2)}, map[string]any{"max-length": 3}, map[string]any{"max-length": 8}, func(t *testing.T, a queueargs.Args) {
			require.EqualValues(t, 2, a.MaxLength)
		}},
		{"max-length-bytes: operator lowest", map[string]any{"x-max-length-bytes": int32(100)}, map[string]any{"max-length-bytes": 50}, map[string]any{"max-length-bytes": 10}, func(t *testing.T, a queueargs.Args) {
			require.EqualValues(t, 10, a.MaxLengthBytes)
		}},
		{"delivery-limit: smaller wins", map[string]any{"x-delivery-limit": int32(5)}, map[string]any{"delivery-limit": 2}, nil, func(t *testing.T, a queueargs.Args) {
			require.EqualValues(t, 2, a.DeliveryLimit)
		}},
		{"delivery-limit: negative policy is unlimited, loses", map[string]any{"x-delivery-limit": int32(5)}, map[string]any{"delivery-limit": -1}, nil, func(t *testing.T, a queueargs.Args) {
			require.EqualValues(t, 5, a.DeliveryLimit)
		}},
		{"delivery-limit: negative alone is unlimited", nil, map[string]any{"delivery-limit": -7}, nil, func(t *testing.T, a queueargs.Args) {
			require.EqualValues(t, -1, a.DeliveryLimit)
		}},
		{"delivery-limit: operator over unlimited policy", nil, map[string]any{"delivery-limit": -1}, map[string]any{"delivery-limit": 4}, func(t *testing.T, a queueargs.Args) {
			require.EqualValues(t, 4, a.DeliveryLimit)
		}},
		{"dlx: argument wins", map[string]any{"x-dead-letter-exchange": "arg"}, map[string]any{"dead-letter-exchange": "pol", "dead-letter-routing-key": "k"}, nil, func(t *testing.T, a queueargs.Args) {
			require.Equal(t, "arg", a.DeadLetterExch)
			require.True(t, a.HasDLXKey)
			require.Equal(t, "k", a.DeadLetterKey)
		}},
		{"dlx from policy", nil, map[string]any{"dead-letter-exchange": "pol"}, nil, func(t *testing.T, a queueargs.Args) {
			require.True(t, a.HasDLX)
			require.Equal(t, "pol", a.DeadLetterExch)
			require.False(t, a.HasDLXKey)
		}},
		{"dlrk: argument wins", map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "arg"}, map[string]any{"dead-letter-routing-key": "pol"}, nil, func(t *testing.T, a queueargs.Args) {
			require.Equal(t, "arg", a.DeadLetterKey)
		}},
		{"overflow: classic argument wins", map[string]any{"x-overflow": "reject-publish"}, map[string]any{"overflow": "drop-head"}, nil, func(t *testing.T, a queueargs.Args) {
			require.Equal(t, queueargs.RejectPublish, a.Overflow)
		}},
		{"overflow: quorum policy wins", map[string]any{"x-queue-type": "quorum", "x-overflow": "reject-publish"}, map[string]any{"overflow": "drop-head"}, nil, func(t *testing.T, a queueargs.Args) {
			require.Equal(t, queueargs.DropHead, a.Overflow)
		}},
		{"overflow: operator over policy", nil, map[string]any{"overflow": "drop-head"}, map[string]any{"overflow": "reject-publish-dlx"}, func(t *testing.T, a queueargs.Args) {
			require.Equal(t, queueargs.RejectPublishDLX, a.Overflow)
		}},
		{"no policy: the arguments", map[string]any{"x-max-length": int32(4)}, nil, nil, func(t *testing.T, a queueargs.Args) {
			require.Equal(t, args(parse(map[string]any{"x-max-length": int32(4)})), a)
		}},
		{"fixed at declare", map[string]any{"x-max-priority": int32(5), "x-single-active-consumer": true}, map[string]any{"max-length": 1}, nil, func(t *testing.T, a queueargs.Args) {
			require.EqualValues(t, 5, a.MaxPriority)
			require.True(t, a.SingleActive)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, Effective(Inputs{Args: parse(tc.args), Policy: def(tc.policy), Operator: def(tc.operator)}))
		})
	}
}

func normalizeMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k], _ = normalize(v)
	}
	return out
}

func TestEffectiveDefinition(t *testing.T) {
	m := Match{
		Policy:   compiled(t, "p", ".", "", 0, false, map[string]any{"max-length": 10, "dead-letter-exchange": "d", "delivery-limit": -1}),
		Operator: compiled(t, "o", ".", "", 0, true, map[string]any{"max-length": 5, "expires": 100, "delivery-limit": 3}),
	}
	require.Equal(t, map[string]any{"max-length": int64(5), "dead-letter-exchange": "d", "expires": int64(100), "delivery-limit": int64(3)}, m.Definition())
	require.Nil(t, Match{}.Definition())
	require.Equal(t, "", Match{}.AlternateExchange())
}
