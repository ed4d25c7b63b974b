package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// segmentRouter is the hand-made router the management API had before
// it was routed by a net/http ServeMux, kept verbatim but for how it
// hands the parameters on (SetPathValue, as the ServeMux does), as the
// reference TestRoutingMatchesSegmentRouter compares the ServeMux with.
type segmentRouter struct{ *mgmt }

func (m segmentRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	if !m.guard.admit(w, r) {
		return
	}
	raw := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	segs := make([]string, len(raw))
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil {
			WriteError(w, http.StatusBadRequest, "bad_request", "malformed path")
			return
		}
		segs[i] = u
	}
	var allowed []string
	for _, rt := range m.routes {
		params, ok := matchSegs(rt.segs, segs)
		if !ok {
			continue
		}
		if r.Method == http.MethodOptions || rt.method != r.Method && !(rt.method == "GET" && r.Method == "HEAD") {
			allowed = append(allowed, rt.method)
			continue
		}
		user, ok := Authenticate(m.b, w, r)
		if !ok {
			return
		}
		if !HasTag(user, "administrator", "monitoring", "management", "policymaker") {
			WriteError(w, http.StatusUnauthorized, "not_authorised", "Not management user")
			return
		}
		if rt.need == administrator && !HasTag(user, "administrator") {
			WriteError(w, http.StatusUnauthorized, "not_authorised", "Not administrator user")
			return
		}
		if rt.need == policymaker && !HasTag(user, "administrator", "policymaker") {
			WriteError(w, http.StatusUnauthorized, "not_authorised", "User not authorised to access object")
			return
		}
		if !acceptsBody(w, r, rt.upload) {
			return
		}
		for k, v := range params {
			r.SetPathValue(k, v)
		}
		rt.h(&mgmtCall{w: w, r: r, user: user, route: rt, all: HasTag(user, "administrator", "monitoring")})
		return
	}
	if len(allowed) > 0 && r.Method == http.MethodOptions {
		m.guard.preflight(w, r, optionsAllow(allowed))
		return
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(slices.Compact(allowed), ", "))
		WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", "Method Not Allowed")
		return
	}
	notFound(w)
}

func matchSegs(pattern, segs []string) (map[string]string, bool) {
	if len(pattern) != len(segs) {
		return nil, false
	}
	var params map[string]string
	for i, p := range pattern {
		if strings.HasPrefix(p, "{") {
			if params == nil {
				params = make(map[string]string, 3)
			}
			params[p[1:len(p)-1]] = segs[i]
			continue
		}
		if p != segs[i] {
			return nil, false
		}
	}
	return params, true
}

// routingAccounts logs in the routing test's users; the rest of Broker
// is never called, as every route's handler is replaced.
type routingAccounts struct{ Broker }

func (routingAccounts) Authenticate(_ context.Context, name, password string, _ net.Addr) (Caller, error) {
	tags := map[string][]string{"guest": {"administrator"}, "mon": {"monitoring"}, "pol": {"policymaker"}, "app": nil}
	if t, ok := tags[name]; ok && password == name {
		return Caller{Name: name, Tags: t}, nil
	}
	return Caller{}, errors.New("login failed")
}

// routingHandlers returns the management handler over routingAccounts
// with every route's handler replaced by one that answers which route
// it is and the parameters it got, and the same routes under
// segmentRouter.
func routingHandlers(t *testing.T) (mux, segments http.Handler, routes []*mgmtRoute) {
	t.Helper()
	h := New(routingAccounts{}, Config{AllowOrigins: []string{"https://ui.example"}})
	m := h.(*mgmt)
	for _, rt := range m.routes {
		rt.h = func(c *mgmtCall) {
			params := map[string]string{}
			for _, s := range c.route.segs {
				if name, ok := strings.CutPrefix(s, "{"); ok {
					name = strings.TrimSuffix(name, "}")
					params[name] = c.p(name)
				}
			}
			writeJSON(c.w, http.StatusOK, map[string]any{
				"route": c.route.method + " " + c.route.pattern, "method": c.r.Method,
				"params": params, "has_vhost": c.has("vhost"), "query": c.r.URL.RawQuery,
			})
		}
	}
	return m, segmentRouter{m}, m.routes
}

// routingSegments are path segments, as sent, that a parameter may be:
// the default vhost, escaped slashes, spaces, "+", unicode escaped and
// raw, "%" as "%25" (and "%2525"), dots, lowercase escapes, names equal
// to a pattern's literal segments, characters a segment may carry
// unescaped, a NUL, and nothing at all.
var routingSegments = []string{
	"%2F", "%2f", "a%2Fb", "%2F%2F", "a%20b", "a+b", "%C3%BCber", "über", "%E2%82%AC", "%25", "%2525",
	"100%25", "%2541", ".", "..", "%2E", "%2E%2E", "...", "amq.default", "e", "q", "api", "permissions",
	"a;b", "a,b", "a=b@c:d$&'()*!", "[x]", "~", "%7E", "%00", "%3F", "a%3Fb", "%23", "",
}

// routingCase is one request of TestRoutingMatchesSegmentRouter.
type routingCase struct {
	method, target, user string
	header               map[string]string
}

// routingCases are the requests both routers must answer alike: for each
// route, each method with each of routingSegments in each of its
// parameters (the others "%2F" or "x"), as each kind of user and
// anonymously for the route's own method; then paths no pattern has
// (trailing and doubled slashes, prefixes, extensions of a route, the
// root, a query string), OPTIONS with and without an allowed origin, and
// a CONNECT.
func routingCases(routes []*mgmtRoute) []routingCase {
	methods := []string{"GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"}
	var cases []routingCase
	seen := map[string]bool{}
	add := func(c routingCase) {
		k := c.method + " " + c.target + " " + c.user + " " + c.header["Origin"]
		if !seen[k] {
			seen[k] = true
			cases = append(cases, c)
		}
	}
	for _, rt := range routes {
		var wild []int
		for i, s := range rt.segs {
			if strings.HasPrefix(s, "{") {
				wild = append(wild, i)
			}
		}
		path := func(at int, v string) string {
			segs := slices.Clone(rt.segs)
			for _, i := range wild {
				segs[i] = "x"
				if segs[i-1] == "vhosts" || i == 2 {
					segs[i] = "%2F"
				}
				if i == at {
					segs[i] = v
				}
			}
			return "/" + strings.Join(segs, "/")
		}
		for _, user := range []string{"guest", "mon", "pol", "app", ""} {
			add(routingCase{method: rt.method, target: path(-1, ""), user: user})
		}
		for _, m := range methods {
			add(routingCase{method: m, target: path(-1, ""), user: "guest"})
			add(routingCase{method: m, target: path(-1, "") + "/", user: "guest"})
			add(routingCase{method: m, target: "/" + path(-1, "") + "//", user: "guest"})
		}
		for _, i := range wild {
			for _, v := range routingSegments {
				for _, m := range methods {
					add(routingCase{method: m, target: path(i, v), user: "guest"})
				}
			}
		}
		add(routingCase{method: rt.method, target: path(-1, "") + "/extra", user: "guest"})
		add(routingCase{method: rt.method, target: path(-1, "") + "?a=1&b=%2F", user: "guest"})
		add(routingCase{method: "OPTIONS", target: path(-1, ""), header: map[string]string{
			"Origin": "https://ui.example", "Access-Control-Request-Method": rt.method, "Access-Control-Request-Headers": "authorization"}})
		add(routingCase{method: "OPTIONS", target: path(-1, ""), header: map[string]string{"Origin": "https://evil.example"}})
		add(routingCase{method: rt.method, target: path(-1, ""), user: "guest", header: map[string]string{"Origin": "https://evil.example"}})
	}
	for _, p := range []string{"/", "//", "/api", "/api/", "/api/nosuch", "/api/vhosts/%2F/nosuch", "/API/overview",
		"/api//overview", "//api/overview", "/api/./overview", "/api/../api/overview", "/api/%6Fverview", "/api/overview%2F",
		"/api%2Foverview", "/api/queues/%2F/q/get/extra", "/x/api/overview"} {
		for _, m := range methods {
			add(routingCase{method: m, target: p, user: "guest"})
		}
	}
	add(routingCase{method: "CONNECT", target: "/api/overview", user: "guest"})
	return cases
}

// TestRoutingMatchesSegmentRouter holds the ServeMux routing to what the
// hand-made router did: for every request of routingCases, the same
// route with the same parameters (or the same 404, 405 with its Allow
// list, OPTIONS answer, 401, 403), byte for byte and header for header.
func TestRoutingMatchesSegmentRouter(t *testing.T) {
	mux, segments, routes := routingHandlers(t)
	cases := routingCases(routes)
	require.Greater(t, len(cases), 5000)
	served := map[string]bool{}
	for _, tc := range cases {
		answer := func(h http.Handler) *httptest.ResponseRecorder {
			req := httptest.NewRequest(tc.method, tc.target, nil)
			if tc.user != "" {
				req.SetBasicAuth(tc.user, tc.user)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		want, got := answer(segments), answer(mux)
		name := tc.method + " " + tc.target + " as " + tc.user
		require.Equal(t, want.Code, got.Code, "%s: %s", name, got.Body)
		require.Equal(t, want.Header(), got.Header(), name)
		require.Equal(t, want.Body.String(), got.Body.String(), name)
		if got.Code == http.StatusOK && tc.method != "OPTIONS" && tc.method != "HEAD" {
			var body struct{ Route string }
			require.NoError(t, json.Unmarshal(got.Body.Bytes(), &body), name)
			served[body.Route] = true
		}
	}
	for _, rt := range routes {
		require.True(t, served[rt.method+" "+rt.pattern], "no case reached %s %s", rt.method, rt.pattern)
	}
}

// TestRoutingParameters lists what a route's parameters are for paths
// that need care: the default vhost and names with escaped slashes,
// spaces, "%", unicode, dots, and empty segments, which stay empty
// parameters as they always were.
func TestRoutingParameters(t *testing.T) {
	mux, _, _ := routingHandlers(t)
	for _, tc := range []struct {
		method, target, route string
		params                map[string]string
	}{
		{"GET", "/api/vhosts/%2F", "GET /api/vhosts/{vhost}", map[string]string{"vhost": "/"}},
		{"GET", "/api/vhosts/%2f", "GET /api/vhosts/{vhost}", map[string]string{"vhost": "/"}},
		{"GET", "/api/vhosts/%2F/", "GET /api/vhosts/{vhost}", map[string]string{"vhost": "/"}},
		{"GET", "/api/vhosts/", "GET /api/vhosts", map[string]string{}},
		{"GET", "/api/queues/%2F/a%2Fb%20c", "GET /api/queues/{vhost}/{name}", map[string]string{"vhost": "/", "name": "a/b c"}},
		{"GET", "/api/queues/dev%2Fteam/%25", "GET /api/queues/{vhost}/{name}", map[string]string{"vhost": "dev/team", "name": "%"}},
		{"GET", "/api/queues/%2F/100%2525", "GET /api/queues/{vhost}/{name}", map[string]string{"vhost": "/", "name": "100%25"}},
		{"GET", "/api/queues/%2F/a+b", "GET /api/queues/{vhost}/{name}", map[string]string{"vhost": "/", "name": "a+b"}},
		{"GET", "/api/queues/%C3%BC/%E2%82%AC", "GET /api/queues/{vhost}/{name}", map[string]string{"vhost": "ü", "name": "€"}},
		{"GET", "/api/queues/%2F/..", "GET /api/queues/{vhost}/{name}", map[string]string{"vhost": "/", "name": ".."}},
		{"GET", "/api/queues/%2F/.", "GET /api/queues/{vhost}/{name}", map[string]string{"vhost": "/", "name": "."}},
		{"GET", "/api/queues//q", "GET /api/queues/{vhost}/{name}", map[string]string{"vhost": "", "name": "q"}},
		{"GET", "/api/queues/%00/q", "GET /api/queues/{vhost}/{name}", map[string]string{"vhost": "\x00", "name": "q"}},
		{"POST", "/api/exchanges/%2F//publish", "POST /api/exchanges/{vhost}/{name}/publish", map[string]string{"vhost": "/", "name": ""}},
		{"GET", "/api/bindings/%2F/e//q/a%2Fq", "GET /api/bindings/{vhost}/e/{source}/q/{dest}", map[string]string{"vhost": "/", "source": "", "dest": "a/q"}},
		{"DELETE", "/api/bindings/%2F/e/x/e/y/k~h%2B", "DELETE /api/bindings/{vhost}/e/{source}/e/{dest}/{props}", map[string]string{"vhost": "/", "source": "x", "dest": "y", "props": "k~h+"}},
		{"GET", "/api/connections/127.0.0.1%3A5000%20-%3E%20127.0.0.1%3A5672", "GET /api/connections/{name}", map[string]string{"name": "127.0.0.1:5000 -> 127.0.0.1:5672"}},
		{"GET", "/api/channels/c%20(1)", "GET /api/channels/{name}", map[string]string{"name": "c (1)"}},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.target, nil)
			req.SetBasicAuth("guest", "guest")
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			var body struct {
				Route  string
				Params map[string]string
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
			require.Equal(t, tc.route, body.Route)
			require.Equal(t, tc.params, body.Params)
		})
	}
}
