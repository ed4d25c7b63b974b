package mgmt

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// New returns the management API's handler, serving b (see the package
// doc for what it serves and who may do what) with cfg.
func New(b Broker, cfg Config) http.Handler {
	m := &mgmt{b: b, guard: newOriginGuard(cfg.AllowOrigins)}
	m.register()
	m.mux = m.routeMux()
	return m
}

type mgmt struct {
	b      Broker
	guard  *originGuard // csrf.go
	routes []*mgmtRoute
	mux    *http.ServeMux // routeMux
}

// access is the tag a route needs.
type access uint8

const (
	anyManagement access = iota // administrator, monitoring, management, policymaker
	administrator
	policymaker // policymaker or administrator (policies.go)
)

type mgmtRoute struct {
	method  string
	pattern string   // a ServeMux path pattern: literal segments, "{name}" for a parameter
	segs    []string // pattern's segments
	need    access
	h       func(*mgmtCall)
	// upload: the body may be multipart/form-data too (csrf.go).
	upload bool
}

// mgmtCall is one request being served.
type mgmtCall struct {
	w     http.ResponseWriter
	r     *http.Request
	user  Caller
	route *mgmtRoute
	// all: the user may see every vhost and connection (administrator,
	// monitoring).
	all bool
	// grants caches the user's permissions per vhost (access.go), and
	// vhostOK the vhost access user.Authz decided.
	grants  map[string]*Grant
	vhostOK map[string]bool
}

// p is the path parameter name: the segment it matched, unescaped (a
// vhost "%2F" is "/").
func (c *mgmtCall) p(name string) string { return c.r.PathValue(name) }

// has reports whether c's route has the parameter name, as GET
// /api/queues/{vhost} has "vhost" and GET /api/queues has not.
func (c *mgmtCall) has(name string) bool { return slices.Contains(c.route.segs, "{"+name+"}") }

func (m *mgmt) handle(method, pattern string, need access, h func(*mgmtCall)) {
	m.routes = append(m.routes, &mgmtRoute{method: method, pattern: pattern,
		segs: strings.Split(strings.Trim(pattern, "/"), "/"), need: need, h: h})
}

// handleUpload is handle for a route that also takes a multipart form
// upload.
func (m *mgmt) handleUpload(method, pattern string, need access, h func(*mgmtCall)) {
	m.handle(method, pattern, need, h)
	m.routes[len(m.routes)-1].upload = true
}

// register declares the routes, a resource at a time: each resource's
// file lists its own.
func (m *mgmt) register() {
	m.overviewRoutes()        // overview.go
	m.vhostRoutes()           // vhosts.go
	m.userRoutes()            // users.go
	m.permissionRoutes()      // permissions.go
	m.exchangeRoutes()        // exchanges.go
	m.queueRoutes()           // queues.go
	m.bindingRoutes()         // bindings.go
	m.connectionRoutes()      // connections.go
	m.channelRoutes()         // channels.go
	m.consumerRoutes()        // consumers.go
	m.definitionRoutes()      // definitions.go
	m.healthRoutes()          // health.go
	m.vhostLimitRoutes()      // vhostlimits.go
	m.topicPermissionRoutes() // topicpermissions.go
	m.policyRoutes()          // policies.go
	m.parameterRoutes()       // parameters.go
	m.shovelRoutes()          // shovels.go
	m.federationRoutes()      // federation.go
	m.replicaRoutes()         // replicas.go
}

// routeMux builds the ServeMux that routes m's requests: each route
// under its method and pattern; each pattern once more without a method,
// for the methods it has no route for (otherMethods); and "/" for every
// other path, 404 with RabbitMQ's body. Registering panics on two routes
// that conflict, so no route can shadow another.
func (m *mgmt) routeMux() *http.ServeMux {
	mux := http.NewServeMux()
	var patterns []string
	methods := make(map[string][]string)
	for _, rt := range m.routes {
		mux.Handle(rt.method+" "+rt.pattern, m.serveRoute(rt))
		if _, ok := methods[rt.pattern]; !ok {
			patterns = append(patterns, rt.pattern)
		}
		methods[rt.pattern] = append(methods[rt.pattern], rt.method)
	}
	for _, p := range patterns {
		mux.Handle(p, m.otherMethods(methods[p]))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { notFound(w) })
	// With GODEBUG=httpmuxgo121=1 the ServeMux takes "GET /api/overview"
	// for a literal path, and every route would be 404.
	probe := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/api/overview"}}
	if _, p := mux.Handler(probe); p != "GET /api/overview" {
		panic("mgmt: net/http.ServeMux does not route method patterns (GODEBUG httpmuxgo121=1?)")
	}
	return mux
}

// ServeHTTP refuses a change from another origin before anything else
// (csrf.go), then routes r with m's ServeMux on the path as routable
// rewrites it. The route asks for the login (serveRoute), so that a path
// with no route is 404 and a method with none 405 without one.
func (m *mgmt) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	if !m.guard.admit(w, r) {
		return
	}
	if r.RequestURI == "*" {
		notFound(w) // the ServeMux would answer 400 itself; no route has the path "*"
		return
	}
	r, ok := routable(r)
	if !ok {
		WriteError(w, http.StatusBadRequest, "bad_request", "malformed path")
		return
	}
	m.mux.ServeHTTP(w, r)
}

// standIn stands for a path segment the ServeMux cannot route, in the
// path routable gives it: an empty segment (the ServeMux would redirect
// the path to a cleaned one) and one that unescapes to "/", the default
// vhost's "%2F" (the ServeMux takes a segment "/" for a trailing slash,
// which no wildcard matches). No literal segment of a pattern is "\x00".
const standIn = "%00"

// standInsKey is the request context key of the segments routable put
// standIn for, []standInSegment.
type standInsKey struct{}

// standInSegment is segment i of a path, which was value.
type standInSegment struct {
	i     int
	value string
}

// routable returns r with the path m's ServeMux is to route. The path is
// split into segments on the escaped path after the slashes at either
// end are trimmed, and each is unescaped, as the ServeMux itself splits
// and unescapes: "a%2Fb" is one segment "a/b". The ServeMux would
// redirect a path that is not clean (a trailing slash, an empty segment,
// a "." or ".." segment) to the cleaned one, and cannot route a segment
// "%2F"; Warren's API has always taken "/api/vhosts/" for /api/vhosts,
// an empty segment for an empty parameter and "." and ".." for names, so
// routable writes the segments back in a clean form that the ServeMux
// unescapes to the same: each escaped again, "." and ".." as "%2E", and
// standIn for an empty one or "/", which serveRoute puts back. ok is
// false when a segment does not unescape.
func routable(r *http.Request) (_ *http.Request, ok bool) {
	escaped := r.URL.EscapedPath()
	var b strings.Builder
	b.Grow(len(escaped) + 1)
	var stood []standInSegment
	for i, s := range strings.Split(strings.Trim(escaped, "/"), "/") {
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, false
		}
		b.WriteByte('/')
		switch u {
		case "", "/":
			stood = append(stood, standInSegment{i, u})
			b.WriteString(standIn)
		case ".", "..":
			b.WriteString(strings.Repeat("%2E", len(u)))
		default:
			b.WriteString(url.PathEscape(u))
		}
	}
	path := b.String()
	if path == escaped {
		return r, true
	}
	ctx := r.Context()
	if stood != nil {
		ctx = context.WithValue(ctx, standInsKey{}, stood)
	}
	r = r.WithContext(ctx) // a shallow copy
	u := *r.URL
	u.RawPath = path
	u.Path, _ = url.PathUnescape(path) // escaped just above
	r.URL = &u
	return r, true
}

// serveRoute serves rt's requests: the login and the tags rt needs first,
// then the body's type (RabbitMQ's 415 comes after its 401), then rt's
// handler.
func (m *mgmt) serveRoute(rt *mgmtRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stood, ok := r.Context().Value(standInsKey{}).([]standInSegment); ok {
			for _, s := range stood {
				// Only a wildcard matches standIn.
				r.SetPathValue(strings.Trim(rt.segs[s.i], "{}"), s.value)
			}
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
		rt.h(&mgmtCall{w: w, r: r, user: user, route: rt, all: HasTag(user, "administrator", "monitoring")})
	})
}

// otherMethods answers a request for a pattern that has routes for
// methods but not for the request's: OPTIONS with the preflight answer
// (csrf.go), anything else 405 with RabbitMQ's body. Neither needs a
// login.
func (m *mgmt) otherMethods(methods []string) http.Handler {
	allow := strings.Join(slices.Compact(slices.Clone(methods)), ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			m.guard.preflight(w, r, optionsAllow(methods))
			return
		}
		w.Header().Set("Allow", allow)
		WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", "Method Not Allowed")
	})
}

// optionsAllow is the Allow list of an OPTIONS answer for a resource
// with routes for methods, in RabbitMQ's order: HEAD with GET first,
// OPTIONS last.
func optionsAllow(methods []string) []string {
	var out []string
	if slices.Contains(methods, "GET") {
		out = append(out, "HEAD")
	}
	for _, m := range methods {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return append(out, http.MethodOptions)
}

// Authenticate checks r's HTTP basic credentials against a: the users in
// the metadata store (salted hashes, compared in constant time), the same
// accounts AMQP logins use, so a user added, changed or deleted through
// the Go API is so at once here too. When they fail it has answered the
// request (401 with RabbitMQ's realm, or 503) and returns false.
//
// The guards of AMQP logins apply (Accounts.Authenticate): the source's
// throttle delay first, and a user store that does not answer in time is
// 503, not 401.
//
// The metrics handler authenticates its scrapes with it too.
func Authenticate(a Accounts, w http.ResponseWriter, r *http.Request) (Caller, bool) {
	name, password, ok := r.BasicAuth()
	if !ok {
		name, password, ok = bearer(r)
	}
	if ok {
		u, err := a.Authenticate(r.Context(), name, password, remoteAddr(r))
		switch {
		case err == nil:
			markLoggedIn(r) // the connection leaves its source's anonymous share (httplimits.go)
			return u, true
		case errors.Is(err, ErrShuttingDown):
			WriteError(w, http.StatusServiceUnavailable, "service_unavailable", "broker shutting down")
			return Caller{}, false
		case errors.Is(err, ErrUnavailable):
			WriteError(w, http.StatusServiceUnavailable, "service_unavailable", "cannot authenticate now: the user store did not answer; try again, or another cluster member")
			return Caller{}, false
		}
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
	WriteError(w, http.StatusUnauthorized, "not_authorized", "Login failed")
	return Caller{}, false
}

// bearer reads "Authorization: Bearer <token>" (RFC 6750) as a login
// with no user name and the token as the password, as RabbitMQ's
// management API takes an OAuth 2 access token: the backend that checks
// tokens (Options.Auth's oauth2) names the user from it; any other
// backend refuses it as it would a wrong password.
func bearer(r *http.Request) (name, token string, ok bool) {
	h := r.Header.Get("Authorization")
	const scheme = "Bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", "", false
	}
	return "", strings.TrimSpace(h[len(scheme):]), true
}

// HasTag reports whether u has one of tags.
func HasTag(u Caller, tags ...string) bool {
	for _, t := range u.Tags {
		if slices.Contains(tags, t) {
			return true
		}
	}
	return false
}

// remoteAddr is the request's peer as a net.Addr for the login throttle.
func remoteAddr(r *http.Request) net.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return nil
	}
	return net.TCPAddrFromAddrPort(ap)
}
