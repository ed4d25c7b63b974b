package federation

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func decode(t testing.TB, s string) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	return v
}

func TestParseUpstream(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		problems    []string
	}{
		{"uri only", `{"uri":"amqp://h"}`, nil},
		{"uri list", `{"uri":["amqp://a","amqps://b"],"ack-mode":"on-publish","max-hops":2,"ha-policy":"all"}`, nil},
		{"missing uri", `{"prefetch-count":10}`, []string{`Key "uri" not found in up`}},
		{"bad scheme", `{"uri":"http://h"}`, []string{`"http://h" not a valid URI: {unexpected_uri_scheme,"http"}`}},
		{"bad number", `{"uri":"amqp://","prefetch-count":"x"}`, []string{`prefetch-count should be a number, actually was <<"x">>`}},
		{"bad ack-mode", `{"uri":"amqp://","ack-mode":"later"}`,
			[]string{`ack-mode should be one of [<<"no-ack">>,<<"on-publish">>,<<"on-confirm">>], actually was <<"later">>`}},
		{"bad bool", `{"uri":"amqp://","trust-user-id":1}`, []string{`trust-user-id should be boolean, actually was 1`}},
		{"unknown and missing", `{"foo":1}`, []string{`Key "uri" not found in up`, `Unrecognised terms [{<<"foo">>,1}] in up`}},
		{"not an object", `[1]`, []string{`up not a list [1]`}},
		{"uri list with a number", `{"uri":["amqp://a",1]}`, []string{`uri should be binary, actually was 1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseUpstream("up", decode(t, tc.value))
			if tc.problems == nil {
				require.NoError(t, err)
				return
			}
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tc.problems, ve.Problems)
		})
	}
}

func TestParseUpstreamSet(t *testing.T) {
	els, err := ParseUpstreamSet("s", decode(t, `[{"upstream":"a","max-hops":3},{"upstream":"b"}]`))
	require.NoError(t, err)
	require.Len(t, els, 2)
	require.Equal(t, "a", els[0].Upstream)
	require.Equal(t, 3.0, *els[0].MaxHops)

	_, err = ParseUpstreamSet("s", decode(t, `[{"max-hops":3}]`))
	require.EqualError(t, err, "Validation failed\n\nKey \"upstream\" not found in s\n")
}

func TestResolveDefaults(t *testing.T) {
	s, err := ParseUpstream("up", decode(t, `{"uri":"amqp://h","expires":60000}`))
	require.NoError(t, err)
	mh := 4.0
	u := Resolve("up", s, Settings{MaxHops: &mh}, "x")
	require.Equal(t, Upstream{
		Name: "up", URIs: []string{"amqp://h"}, Exchange: "x", Queue: "x", ConsumerTag: "federation-link-up",
		PrefetchCount: 1000, ReconnectDelay: 5 * time.Second, MaxHops: 4, Expires: 60000, MessageTTL: -1,
		AckMode: OnConfirm,
	}, u)
}

func TestUpstreamsFromPolicy(t *testing.T) {
	ups := map[string]Settings{"a": {URIs: []string{"amqp://a"}}, "b": {URIs: []string{"amqp://b"}}}
	l := Lookup{
		Upstream: func(n string) (Settings, bool) { s, ok := ups[n]; return s, ok },
		Set: func(n string) ([]SetElement, bool) {
			if n == "pair" {
				return []SetElement{{Upstream: "b"}, {Upstream: "gone"}}, true
			}
			return nil, false
		},
		All: func() []string { return []string{"a", "b"} },
	}
	names := func(us []Upstream) (out []string) {
		for _, u := range us {
			out = append(out, u.Name)
		}
		return out
	}
	require.Equal(t, []string{"a"}, names(Upstreams(l, Keys{Upstream: "a"}, "x")))
	require.Equal(t, []string{"a", "b"}, names(Upstreams(l, Keys{Set: AllUpstreams}, "x")))
	require.Equal(t, []string{"b"}, names(Upstreams(l, Keys{Set: "pair"}, "x")))
	require.Empty(t, Upstreams(l, Keys{Set: "nope"}, "x"))
	// A pattern matches anywhere in the name, as re:run does.
	require.Equal(t, []string{"b"}, names(Upstreams(l, Keys{Pattern: "^b"}, "x")))
	require.Equal(t, []string{"a", "b"}, names(Upstreams(l, Keys{Pattern: "[ab]"}, "x")))
	require.Empty(t, Upstreams(l, Keys{Pattern: "z"}, "x"))
	require.Empty(t, Upstreams(l, Keys{Pattern: "("}, "x"))
}

func FuzzParseUpstream(f *testing.F) {
	for _, s := range []string{`{"uri":"amqp://h"}`, `{"uri":["amqp://a",1],"x":{}}`, `[{"upstream":"a"}]`, `"s"`, `{"ack-mode":3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return
		}
		if s, err := ParseUpstream("up", v); err == nil && len(s.URIs) == 0 {
			t.Fatalf("accepted an upstream without a uri: %s", b)
		}
		if els, err := ParseUpstreamSet("set", v); err == nil {
			for _, el := range els {
				_ = Resolve(el.Upstream, Settings{}, el.Settings, "x")
			}
		}
	})
}
