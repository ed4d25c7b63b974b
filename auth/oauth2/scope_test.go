package oauth2_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/auth/oauth2"
	"github.com/warrenmq/broker/auth/oauth2/oauth2test"
)

// TestMatch is RabbitMQ's wildcard:match, including its cases from
// wildcard_match_SUITE and its quirks (no backtracking after a star).
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		subject, pattern string
		want             bool
	}{
		{"foo", "foo", true},
		{"foo", "fo", false},
		{"fo", "foo", false},
		{"", "", true},
		{"a", "", false},
		{"", "*", true},
		{"anything", "*", true},
		{"foo", "f*", true},
		{"foo", "*o", false}, // the first "o" is taken, leaving "o" unmatched: RabbitMQ's quirk
		{"foo", "*oo", true},
		{"foo", "f*o", false}, // likewise
		{"foo", "*f*o*", true},
		{"foo", "*x*", false},
		{"foo.bar", "foo.*", true},
		{"foo.bar", "*.bar", true},
		{"foobar", "foo.*", false},
		{"abc", "a*b*c", true},
		{"abbc", "a*b*c", true},
		{"ac", "a*b*c", false},
		{"a", "a**", false}, // two trailing stars need a byte, as in RabbitMQ
		{"ab", "a**", true},
		{"aa", "*a", false}, // leftmost, no backtracking, as in RabbitMQ
		{"ba", "*a", true},
		{"/", "%2F", true},
		{"/", "%2f", true},
		{"a/b", "a%2F*", true},
		{"a b", "a+b", true},
		{"a+b", "a+b", false},
		{"a*b", "a%2Ab", true},
		{"axb", "a%2Ab", false},
		{"100%", "100%", false}, // an undecodable part matches nothing
		{"anything", "*%zz", false},
		{"xyz", "%78*", true},
	} {
		require.Equal(t, tc.want, oauth2.Match(tc.subject, tc.pattern), "Match(%q, %q)", tc.subject, tc.pattern)
	}
}

// TestParseScope reads permission scopes and leaves everything else.
func TestParseScope(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want oauth2.Scope
		ok   bool
	}{
		{"read:*/*", oauth2.Scope{Permission: auth.Read, VHost: "*", Name: "*"}, true},
		{"write:vh/x", oauth2.Scope{Permission: auth.Write, VHost: "vh", Name: "x"}, true},
		{"configure:%2F/q-*", oauth2.Scope{Permission: auth.Configure, VHost: "%2F", Name: "q-*"}, true},
		{"write:vh/amq.topic/a.*", oauth2.Scope{Permission: auth.Write, VHost: "vh", Name: "amq.topic", RoutingKey: "a.*", HasRoutingKey: true}, true},
		{"read:*/*/", oauth2.Scope{Permission: auth.Read, VHost: "*", Name: "*", RoutingKey: "", HasRoutingKey: true}, true},
		{"read:*", oauth2.Scope{}, false},
		{"read:a/b/c/d", oauth2.Scope{}, false},
		{"tag:administrator", oauth2.Scope{}, false},
		{"READ:*/*", oauth2.Scope{}, false},
		{"delete:*/*", oauth2.Scope{}, false},
		{"", oauth2.Scope{}, false},
	} {
		got, ok := oauth2.ParseScope(tc.in)
		require.Equal(t, tc.ok, ok, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

// TestScopeDecisions is the permission table: which scopes grant vhost
// access, configure/write/read on a resource and topic access, as
// rabbit_oauth2_scope decides.
func TestScopeDecisions(t *testing.T) {
	q := func(vh, name string) auth.Resource { return auth.Resource{VHost: vh, Kind: "queue", Name: name} }
	x := func(vh, name string) auth.Resource { return auth.Resource{VHost: vh, Kind: "exchange", Name: name} }
	type check struct {
		vhost string        // VHostAccess(vhost) when r is zero
		r     auth.Resource // ResourceAccess, or TopicAccess when key is set
		p     auth.Permission
		key   string
		topic bool
		want  bool
	}
	for _, tc := range []struct {
		name   string
		scopes []string
		claims map[string]any
		checks []check
	}{
		{"read everything", []string{"read:*/*"}, nil, []check{
			{vhost: "/", want: true},
			{vhost: "any", want: true},
			{r: q("/", "q"), p: auth.Read, want: true},
			{r: q("/", "q"), p: auth.Write, want: false},
			{r: q("/", "q"), p: auth.Configure, want: false},
			{r: x("/", "t"), p: auth.Read, topic: true, key: "a.b", want: false}, // no routing-key part
		}},
		{"one vhost, named queues", []string{"configure:prod/app-*", "write:prod/app-*", "read:prod/app-*"}, nil, []check{
			{vhost: "prod", want: true},
			{vhost: "dev", want: false},
			{r: q("prod", "app-1"), p: auth.Configure, want: true},
			{r: q("prod", "other"), p: auth.Configure, want: false},
			{r: q("dev", "app-1"), p: auth.Read, want: false},
		}},
		{"default vhost is %2F", []string{"read:%2F/*"}, nil, []check{
			{vhost: "/", want: true},
			{vhost: "prod", want: false},
			{r: q("/", "q"), p: auth.Read, want: true},
		}},
		{"topic routing keys", []string{"write:*/amq.topic/orders.*", "read:vh/events/#"}, nil, []check{
			{r: x("/", "amq.topic"), p: auth.Write, topic: true, key: "orders.eu", want: true},
			{r: x("/", "amq.topic"), p: auth.Write, topic: true, key: "payments.eu", want: false},
			{r: x("/", "amq.topic"), p: auth.Read, topic: true, key: "orders.eu", want: false},
			{r: x("/", "amq.topic"), p: auth.Write, want: true}, // the resource check ignores the key part
			{r: x("vh", "events"), p: auth.Read, topic: true, key: "#", want: true},
			{r: x("vh", "events"), p: auth.Read, topic: true, key: "a", want: false}, // '#' is literal here
		}},
		{"vhost and claim variables", []string{"read:{vhost}/q-{sub}", "write:{vhost}/{tenant}-*", "configure:*/{missing}"}, map[string]any{"sub": "alice", "tenant": "acme"}, []check{
			{vhost: "anything", want: true},
			{r: q("vh", "q-alice"), p: auth.Read, want: true},
			{r: q("vh", "q-bob"), p: auth.Read, want: false},
			{r: x("vh", "acme-in"), p: auth.Write, want: true},
			{r: x("vh", "other-in"), p: auth.Write, want: false},
			{r: q("vh", "missing"), p: auth.Configure, want: true}, // an unknown claim is its own name
			{r: q("a/b", "q-alice"), p: auth.Read, want: false},    // a '/' from a variable drops the scope
		}},
		{"a claim holding '/' drops the scope", []string{"read:vh/{c}"}, map[string]any{"c": "q/x/y"}, []check{
			{vhost: "vh", want: false},
		}},
		{"spoiled variables", []string{"read:{a.b}/*", "read:{open/*"}, nil, []check{
			{vhost: "a.b", want: false},
			{vhost: "{open", want: false},
		}},
		{"no permission scopes", []string{"tag:administrator", "openid"}, nil, []check{
			{vhost: "/", want: false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := oauth2.ParseScopes(tc.scopes, tc.claims)
			for _, c := range tc.checks {
				var got bool
				switch {
				case c.r == (auth.Resource{}):
					got = tok.VHostAccess(c.vhost)
				case c.topic:
					got = tok.TopicAccess(c.r, c.p, c.key)
				default:
					got = tok.ResourceAccess(c.r, c.p)
				}
				require.Equal(t, c.want, got, "%+v", c)
			}
		})
	}
}

// TestScopeSources: scopes come from the scope claim (a string or a
// list), the additional_scopes_key paths (nested, through lists, and a
// Keycloak resource_access object keyed by the resource server), a
// Requesting Party Token, and scope aliases; only those with the prefix
// count, and more than 2048 is a refusal.
func TestScopeSources(t *testing.T) {
	is := oauth2test.NewIssuer(t)
	b := newBackend(t, oauth2.Config{
		ResourceServerID:    "rabbitmq",
		JWKSURL:             is.URL(),
		AdditionalScopesKey: "roles realm_access.roles resource_access groups.perms",
		ScopeAliases: map[string][]string{
			"admin-role": {"rabbitmq.configure:*/*", "rabbitmq.tag:administrator"},
		},
	})
	claims := oauth2test.Claims("rabbitmq", "alice", "", time.Hour)
	claims["scope"] = []any{"rabbitmq.read:a/*", 7, "admin-role"}
	claims["roles"] = "rabbitmq.read:b/* unrelated"
	claims["realm_access"] = map[string]any{"roles": []any{"rabbitmq.read:c/*"}}
	claims["resource_access"] = map[string]any{"rabbitmq": []any{"read:d/*"}, "account": []any{"view"}}
	claims["groups"] = []any{map[string]any{"perms": "rabbitmq.read:e/*"}, "skipped", map[string]any{"perms": []any{"rabbitmq.read:f/*"}}}
	claims["authorization"] = map[string]any{"permissions": []any{map[string]any{"scopes": []any{"rabbitmq.read:g/*"}}}}
	id, err := b.Authenticate(context.Background(), login(is.Sign(claims, "", false)))
	require.NoError(t, err)
	require.Equal(t, []string{"configure:*/*", "read:a/*", "read:b/*", "read:c/*", "read:d/*", "read:e/*", "read:f/*", "read:g/*", "tag:administrator"},
		id.Impl.(*oauth2.Token).Scopes)
	require.Equal(t, []string{"administrator"}, id.Tags)

	prefixed := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL(), ScopePrefix: "api://rabbit/"})
	c2 := oauth2test.Claims("rabbitmq", "alice", "api://rabbit/read:*/* rabbitmq.write:*/*", time.Hour)
	id, err = prefixed.Authenticate(context.Background(), login(is.Sign(c2, "", false)))
	require.NoError(t, err)
	require.Equal(t, []string{"read:*/*"}, id.Impl.(*oauth2.Token).Scopes, "scope_prefix replaces <resource_server_id>.")

	bare := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL(), EmptyScopePrefix: true})
	c4 := oauth2test.Claims("rabbitmq", "alice", "read:*/* tag:management rabbitmq.write:*/*", time.Hour)
	id, err = bare.Authenticate(context.Background(), login(is.Sign(c4, "", false)))
	require.NoError(t, err)
	require.Equal(t, []string{"rabbitmq.write:*/*", "read:*/*", "tag:management"}, id.Impl.(*oauth2.Token).Scopes, "scope_prefix = '' keeps every scope as it is")
	require.Equal(t, []string{"management"}, id.Tags)

	many := make([]any, 2049)
	for i := range many {
		many[i] = fmt.Sprintf("rabbitmq.read:v%d/*", i)
	}
	c3 := oauth2test.Claims("rabbitmq", "alice", "", time.Hour)
	c3["scope"] = many
	big := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL(), MaxTokenBytes: 1 << 20})
	_, err = big.Authenticate(context.Background(), login(is.Sign(c3, "", false)))
	require.ErrorIs(t, err, auth.ErrRefused)
	require.ErrorContains(t, err, "more than 2048")
}
