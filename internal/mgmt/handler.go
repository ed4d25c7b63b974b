package mgmt

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/amqpconv"
	"github.com/warrenmq/broker/internal/rates"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// New returns the management API's handler, serving b (see the package
// doc for what it serves and who may do what).
func New(b Broker) http.Handler {
	m := &mgmt{b: b}
	m.register()
	return m
}

type mgmt struct {
	b      Broker
	routes []mgmtRoute
}

// access is the tag a route needs.
type access uint8

const (
	anyManagement access = iota // administrator, monitoring, management, policymaker
	administrator
	policymaker // policymaker or administrator (policies.go)
)

type mgmtRoute struct {
	method string
	segs   []string // literal segments, "{name}" for a parameter
	need   access
	h      func(*mgmtCall)
}

// mgmtCall is one request being served.
type mgmtCall struct {
	w      http.ResponseWriter
	r      *http.Request
	user   User
	params map[string]string
	// all: the user may see every vhost and connection (administrator,
	// monitoring).
	all bool
	// grants caches the user's permissions per vhost (access.go).
	grants map[string]*Grant
}

func (c *mgmtCall) p(name string) string { return c.params[name] }

func (m *mgmt) handle(method, pattern string, need access, h func(*mgmtCall)) {
	m.routes = append(m.routes, mgmtRoute{method: method, segs: strings.Split(strings.Trim(pattern, "/"), "/"), need: need, h: h})
}

func (m *mgmt) register() {
	m.handle("GET", "/api/overview", anyManagement, m.overview)
	m.handle("GET", "/api/nodes", anyManagement, m.nodes)
	m.handle("GET", "/api/whoami", anyManagement, m.whoami)
	m.handle("GET", "/api/vhosts", anyManagement, m.vhosts)
	m.handle("GET", "/api/vhosts/{vhost}", anyManagement, m.vhost)
	m.handle("PUT", "/api/vhosts/{vhost}", administrator, m.putVHost)
	m.handle("DELETE", "/api/vhosts/{vhost}", administrator, m.deleteVHost)
	m.handle("GET", "/api/vhosts/{vhost}/permissions", administrator, m.vhostPermissions)
	m.handle("GET", "/api/users", administrator, m.users)
	m.handle("GET", "/api/users/{user}", administrator, m.user)
	m.handle("PUT", "/api/users/{user}", administrator, m.putUser)
	m.handle("DELETE", "/api/users/{user}", administrator, m.deleteUser)
	m.handle("GET", "/api/users/{user}/permissions", administrator, m.userPermissions)
	m.handle("GET", "/api/permissions", administrator, m.permissions)
	m.handle("GET", "/api/permissions/{vhost}/{user}", administrator, m.permission)
	m.handle("PUT", "/api/permissions/{vhost}/{user}", administrator, m.putPermission)
	m.handle("DELETE", "/api/permissions/{vhost}/{user}", administrator, m.deletePermission)
	m.handle("GET", "/api/exchanges", anyManagement, m.exchanges)
	m.handle("GET", "/api/exchanges/{vhost}", anyManagement, m.exchanges)
	m.handle("GET", "/api/exchanges/{vhost}/{name}", anyManagement, m.exchange)
	m.handle("PUT", "/api/exchanges/{vhost}/{name}", anyManagement, m.putExchange)
	m.handle("DELETE", "/api/exchanges/{vhost}/{name}", anyManagement, m.deleteExchange)
	m.handle("GET", "/api/exchanges/{vhost}/{name}/delayed", anyManagement, m.delayed)
	m.handle("POST", "/api/exchanges/{vhost}/{name}/publish", anyManagement, m.publish)
	m.handle("GET", "/api/queues", anyManagement, m.queues)
	m.handle("GET", "/api/queues/{vhost}", anyManagement, m.queues)
	m.handle("GET", "/api/queues/{vhost}/{name}", anyManagement, m.queue)
	m.handle("PUT", "/api/queues/{vhost}/{name}", anyManagement, m.putQueue)
	m.handle("DELETE", "/api/queues/{vhost}/{name}", anyManagement, m.deleteQueue)
	m.handle("GET", "/api/queues/{vhost}/{name}/bindings", anyManagement, m.queueBindings)
	m.handle("DELETE", "/api/queues/{vhost}/{name}/contents", anyManagement, m.purge)
	m.handle("POST", "/api/queues/{vhost}/{name}/get", anyManagement, m.get)
	m.handle("GET", "/api/queues/{vhost}/{name}/unacked", anyManagement, m.unacked) // unacked.go
	m.handle("GET", "/api/bindings", anyManagement, m.bindings)
	m.handle("GET", "/api/bindings/{vhost}", anyManagement, m.bindings)
	for _, kind := range []string{"q", "e"} {
		pattern := "/api/bindings/{vhost}/e/{source}/" + kind + "/{dest}"
		m.handle("GET", pattern, anyManagement, m.bindingsBetween(kind))
		m.handle("POST", pattern, anyManagement, m.postBinding(kind))
		m.handle("GET", pattern+"/{props}", anyManagement, m.binding(kind))
		m.handle("DELETE", pattern+"/{props}", anyManagement, m.deleteBinding(kind))
	}
	m.handle("GET", "/api/connections", anyManagement, m.connections)
	m.handle("GET", "/api/connections/{name}", anyManagement, m.connection)
	m.handle("DELETE", "/api/connections/{name}", anyManagement, m.deleteConnection)
	m.handle("GET", "/api/connections/{name}/channels", anyManagement, m.connectionChannels)
	m.handle("GET", "/api/channels", anyManagement, m.channels)
	m.handle("GET", "/api/channels/{name}", anyManagement, m.channel)
	m.handle("GET", "/api/consumers", anyManagement, m.consumers)
	m.handle("GET", "/api/consumers/{vhost}", anyManagement, m.consumers)
	m.handle("GET", "/api/definitions", administrator, m.definitions)
	m.handle("GET", "/api/health/checks/alarms", anyManagement, m.alarmsCheck("There are alarms in effect in the cluster"))
	m.handle("GET", "/api/health/checks/local-alarms", anyManagement, m.alarmsCheck("There are alarms in effect on the node"))
	m.handle("GET", "/api/health/checks/virtual-hosts", anyManagement, m.vhostsCheck)
	m.handle("GET", "/api/health/checks/port-listener/{port}", anyManagement, m.portListenerCheck)
	m.handle("GET", "/api/health/checks/protocol-listener/{protocol}", anyManagement, m.protocolListenerCheck)
	m.handle("GET", "/api/aliveness-test/{vhost}", anyManagement, m.alivenessTest)
	m.handle("POST", "/api/definitions", administrator, m.postDefinitions)
	m.registerSettings()
	m.registerPolicies()
}

// ServeHTTP routes on the escaped path, segment by segment, so that a
// vhost named "/" ("%2F") is one segment. (net/http's ServeMux treats an
// unescaped "/" segment as a trailing slash and would not match it.)
func (m *mgmt) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
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
		if rt.method != r.Method && !(rt.method == "GET" && r.Method == "HEAD") {
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
		rt.h(&mgmtCall{w: w, r: r, user: user, params: params, all: HasTag(user, "administrator", "monitoring")})
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
func Authenticate(a Accounts, w http.ResponseWriter, r *http.Request) (User, bool) {
	name, password, ok := r.BasicAuth()
	if ok {
		u, err := a.Authenticate(r.Context(), name, password, remoteAddr(r))
		switch {
		case err == nil:
			return u, true
		case errors.Is(err, ErrShuttingDown):
			WriteError(w, http.StatusServiceUnavailable, "service_unavailable", "broker shutting down")
			return User{}, false
		case errors.Is(err, ErrUnavailable):
			WriteError(w, http.StatusServiceUnavailable, "service_unavailable", "cannot authenticate now: the user store did not answer; try again, or another cluster member")
			return User{}, false
		}
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
	WriteError(w, http.StatusUnauthorized, "not_authorized", "Login failed")
	return User{}, false
}

// HasTag reports whether u has one of tags.
func HasTag(u User, tags ...string) bool {
	for _, t := range u.Tags {
		if slices.Contains(tags, t) {
			return true
		}
	}
	return false
}

// Responses.

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteError answers with RabbitMQ's error object,
// {"error": code, "reason": reason}.
func WriteError(w http.ResponseWriter, status int, code, reason string) {
	body, _ := json.Marshal(map[string]string{"error": code, "reason": reason})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func notFound(w http.ResponseWriter) {
	WriteError(w, http.StatusNotFound, "Object Not Found", "Not Found")
}

// writeAMQPError answers a failed AMQP-level operation the way RabbitMQ's
// management plugin does: 404 not_found, 401 not_authorised for access
// refused, 500 for internal errors, 400 bad_request otherwise. The reason is
// the reply text without its "NOT_FOUND - " style prefix.
func writeAMQPError(w http.ResponseWriter, err error) {
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		if errors.Is(err, ErrNotFound) {
			notFound(w)
			return
		}
		WriteError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
		return
	}
	reason := ae.Text
	if _, rest, ok := strings.Cut(reason, " - "); ok {
		reason = rest
	}
	switch ae.Code {
	case amqp.NotFound:
		WriteError(w, http.StatusNotFound, "not_found", reason)
	case amqp.AccessRefused:
		WriteError(w, http.StatusUnauthorized, "not_authorised", reason)
	case amqp.InternalError:
		WriteError(w, http.StatusInternalServerError, "internal_server_error", reason)
	default:
		WriteError(w, http.StatusBadRequest, "bad_request", reason)
	}
}

// created answers a PUT or POST: 201 for something new, 204 otherwise, as
// RabbitMQ does.
func created(w http.ResponseWriter, isNew bool) {
	if isNew {
		w.WriteHeader(http.StatusCreated)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// noContent answers an operation that returns nothing: 204, or err as
// writeAMQPError answers it.
func noContent(w http.ResponseWriter, err error) {
	if err != nil {
		writeAMQPError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeList answers a listing: a JSON array of items ([] when there are
// none, never null), or err as writeAMQPError answers it.
func writeList[T any](w http.ResponseWriter, items []T, err error) {
	if err != nil {
		writeAMQPError(w, err)
		return
	}
	if items == nil {
		items = []T{}
	}
	writeJSON(w, http.StatusOK, items)
}

// tableArg converts a request body's arguments to an AMQP table, answering
// 400 bad_request when they do not convert.
func tableArg(c *mgmtCall, args map[string]any) (amqp.Table, bool) {
	t, err := definitions.JSONTable(args)
	if err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", err.Error())
		return nil, false
	}
	return t, true
}

// Request body bounds. An object's body (a queue's or exchange's
// arguments, a binding, a get request) is small: its arguments must fit
// one frame anyway (internal/vhost limits.go), and JSON of a few hundred
// KiB covers any that do. Definitions of a large broker are bigger.
const (
	mgmtMaxBody            = 1 << 20
	mgmtMaxDefinitionsBody = 64 << 20
)

// readBody decodes a JSON request body of at most mgmtMaxBody bytes into
// v; an empty body is {}.
func readBody(c *mgmtCall, v any) bool { return readBodyMax(c, v, mgmtMaxBody) }

// readBodyMax is readBody with the bound max: a longer body is 413 and is
// not read further.
func readBodyMax(c *mgmtCall, v any, max int64) bool {
	body := http.MaxBytesReader(c.w, c.r.Body, max)
	err := definitions.DecodeJSON(body, v)
	if err == nil || errors.Is(err, io.EOF) {
		return true // an empty body is {}
	}
	if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
		WriteError(c.w, http.StatusRequestEntityTooLarge, "bad_request", fmt.Sprintf("request body larger than %d bytes", max))
		return false
	}
	WriteError(c.w, http.StatusBadRequest, "bad_request", "not_json")
	return false
}

// flexBool is a JSON boolean that also accepts "true" and "false" as
// strings: rabbitmqadmin sends its flags that way, and RabbitMQ takes them.
type flexBool bool

func (f *flexBool) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true", `"true"`:
		*f = true
	case "false", `"false"`, "null":
		*f = false
	default:
		return fmt.Errorf("mgmt: %s is not a boolean", b)
	}
	return nil
}

// flexInt is a JSON integer that also accepts a numeric string, as
// rabbitmqadmin sends "count".
type flexInt int

func (f *flexInt) UnmarshalJSON(b []byte) error {
	n, err := strconv.Atoi(strings.Trim(string(b), `"`))
	if err != nil {
		return fmt.Errorf("mgmt: %s is not an integer", b)
	}
	*f = flexInt(n)
	return nil
}

// vhostParam returns the vhost a path names, or answers 404 when there is
// none and 401 when the user may not see it (access.go).
func (m *mgmt) vhostParam(c *mgmtCall) (string, bool) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok || c.p("vhost") == "" {
		WriteError(c.w, http.StatusNotFound, "not_found", "vhost_not_found")
		return "", false
	}
	if !m.visible(c, vh) {
		WriteError(c.w, http.StatusUnauthorized, "not_authorised", "User not authorised to access virtual host")
		return "", false
	}
	return vh, true
}

// vhostsParam returns every vhost the user may see, or the one the path
// names.
func (m *mgmt) vhostsParam(c *mgmtCall) ([]string, bool) {
	if _, ok := c.params["vhost"]; !ok {
		return m.visibleVHosts(c), true
	}
	vh, ok := m.vhostParam(c)
	if !ok {
		return nil, false
	}
	return []string{vh}, true
}

// exchangeName maps RabbitMQ's URL name of the default exchange.
func exchangeName(s string) string {
	if s == "amq.default" {
		return ""
	}
	return s
}

// bodyKey is a request body key and whether the body has it.
type bodyKey struct {
	name string
	set  bool
}

// refuseMissing answers 400 with RabbitMQ's "[{key_missing,k},...]" when
// any of keys is not set, naming each in order, and reports whether it
// answered.
func refuseMissing(w http.ResponseWriter, keys ...bodyKey) bool {
	var missing []string
	for _, k := range keys {
		if !k.set {
			missing = append(missing, "{key_missing,"+k.name+"}")
		}
	}
	if len(missing) == 0 {
		return false
	}
	WriteError(w, http.StatusBadRequest, "bad_request", "["+strings.Join(missing, ",")+"]")
	return true
}

func (m *mgmt) node() string { return m.b.NodeName() }

// Overview and accounts.

func (m *mgmt) overview(c *mgmtCall) {
	rq, ok := rateQueriesOf(c)
	if !ok {
		return
	}
	s := m.b.Overview()
	listeners := []map[string]any{}
	for _, a := range s.Listeners {
		listeners = append(listeners, map[string]any{
			"node": m.node(), "protocol": "amqp", "ip_address": a.IP.String(), "port": a.Port,
		})
	}
	slices.SortFunc(listeners, func(a, b map[string]any) int { return a["port"].(int) - b["port"].(int) })
	types := []map[string]any{}
	for _, k := range []string{"direct", "fanout", "headers", "topic"} {
		types = append(types, map[string]any{"name": k, "description": "AMQP " + k + " exchange, as per the AMQP specification", "enabled": true})
	}
	if s.LocalRandomExchange {
		types = append(types, localRandomExchangeType)
	}
	types = append(types, pluginExchangeTypes...)
	queueTotals := map[string]any{}
	addLengths(queueTotals, lengthsOf(s.Ready, s.Unacked), m.details(rates.BrokerKey, rq.lengths))
	writeJSON(c.w, http.StatusOK, map[string]any{
		"management_version": s.RabbitMQVersion,
		"rabbitmq_version":   s.RabbitMQVersion,
		"product_name":       "Warren",
		"product_version":    s.ProductVersion,
		"cluster_name":       m.node(),
		"node":               m.node(),
		"rates_mode":         "none",
		"disable_stats":      false,
		"exchange_types":     types,
		"listeners":          listeners,
		"message_stats":      messageStats(brokerStats, BrokerValues(s.Totals), m.details(rates.BrokerKey, rq.msg)),
		"object_totals": map[string]int{
			"connections": s.Connections, "channels": s.Channels, "consumers": s.Consumers,
			"exchanges": s.Exchanges, "queues": s.Queues,
		},
		"queue_totals": queueTotals,
		"churn_rates": map[string]uint64{
			"connection_created": s.ConnectionsOpened, "connection_closed": s.ConnectionsClosed,
			"channel_created": s.ChannelsOpened, "channel_closed": s.ChannelsClosed,
		},
	})
}

// nodes lists the one node with RabbitMQ's alarm fields.
// mem_used is the message bytes the memory alarm watches, not the whole
// process; disk_free is left out while the disk is not watched.
func (m *mgmt) nodes(c *mgmtCall) {
	a := m.b.Node()
	node := map[string]any{"name": m.node(), "type": "disc", "running": true,
		"mem_alarm": a.MemAlarm, "mem_used": a.MemUsed, "mem_limit": a.MemLimit,
		"disk_free_alarm": a.DiskFreeAlarm, "disk_free_limit": a.DiskFreeLimit}
	if a.DiskFree >= 0 {
		node["disk_free"] = a.DiskFree
	}
	if a.Raft != nil {
		node["raft"] = raftJSON(*a.Raft)
	}
	writeJSON(c.w, http.StatusOK, []map[string]any{node})
}

// raftJSON is the "raft" object of /api/nodes for a replicated meta store
// (a Warren extension: RabbitMQ shows its quorum queues' raft state per
// queue, rabbitmq-diagnostics quorum_status): this member's role, term,
// leader, commit and applied indexes and, on the leader, each member's
// replication progress.
func raftJSON(s meta.ReplicationStatus) map[string]any {
	peers := make([]map[string]any, 0, len(s.Peers))
	for _, p := range s.Peers {
		peers = append(peers, map[string]any{"id": p.ID, "match_index": p.Match, "next_index": p.Next,
			"state": p.State, "recent_active": p.RecentActive})
	}
	return map[string]any{"id": s.ID, "role": s.Role, "leader": s.Leader, "term": s.Term,
		"commit_index": s.Commit, "applied_index": s.Applied, "peers": peers}
}

func (m *mgmt) whoami(c *mgmtCall) {
	writeJSON(c.w, http.StatusOK, map[string]any{"name": c.user.Name, "tags": definitions.UserTags(c.user.Tags)})
}

// vhostJSON is a vhost's object; its message_stats sum its queues'.
func (m *mgmt) vhostJSON(ctx context.Context, vh string, rq rateQueries) map[string]any {
	var ready, unacked uint64
	var sums [rates.MessageValues]uint64
	for _, q := range m.b.Queues(ctx, vh) {
		ready += q.Ready
		unacked += q.Unacked
		for i, v := range QueueValues(q.Counters) {
			sums[i] += v
		}
	}
	key := rates.VHostKey(vh)
	out := map[string]any{
		"name": vh, "description": "", "tags": []string{}, "tracing": false,
		"message_stats": messageStats(queueStats, sums, m.details(key, rq.msg)),
		"cluster_state": map[string]string{m.node(): "running"},
	}
	addLengths(out, lengthsOf(ready, unacked), m.details(key, rq.lengths))
	m.vhostMetadata(ctx, out, vh)
	return out
}

func (m *mgmt) vhosts(c *mgmtCall) {
	rq, ok := rateQueriesOf(c)
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, vh := range m.visibleVHosts(c) {
		out = append(out, m.vhostJSON(c.r.Context(), vh, rq))
	}
	writeJSON(c.w, http.StatusOK, out)
}

func (m *mgmt) vhost(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok {
		notFound(c.w)
		return
	}
	if !m.visible(c, vh) {
		WriteError(c.w, http.StatusUnauthorized, "not_authorised", "User not authorised to access virtual host")
		return
	}
	rq, ok := rateQueriesOf(c)
	if !ok {
		return
	}
	writeJSON(c.w, http.StatusOK, m.vhostJSON(c.r.Context(), vh, rq))
}

func (m *mgmt) users(c *mgmtCall) {
	us, err := m.b.Users(c.r.Context())
	writeList(c.w, us, err)
}

func (m *mgmt) user(c *mgmtCall) {
	u, err := m.b.User(c.r.Context(), c.p("user"))
	if err != nil {
		notFound(c.w)
		return
	}
	writeJSON(c.w, http.StatusOK, u)
}

// deleteUser is DELETE /api/users/{user}: the user, its permissions and
// its open connections go (DeleteUser).
func (m *mgmt) deleteUser(c *mgmtCall) {
	err := m.b.DeleteUser(c.r.Context(), c.p("user"))
	if errors.Is(err, meta.ErrNotFound) {
		notFound(c.w)
		return
	}
	noContent(c.w, err)
}

// permissions lists the stored permissions, as the AMQP side enforces them.
func (m *mgmt) permissions(c *mgmtCall) {
	ps, err := m.b.Permissions(c.r.Context())
	writeList(c.w, ps, err)
}

func (m *mgmt) permission(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok {
		notFound(c.w)
		return
	}
	p, err := m.b.Permission(c.r.Context(), c.p("user"), vh)
	if err != nil {
		notFound(c.w)
		return
	}
	writeJSON(c.w, http.StatusOK, p)
}

// Exchanges.

func (m *mgmt) exchanges(c *mgmtCall) {
	vhs, ok := m.vhostsParam(c)
	if !ok {
		return
	}
	lq, ok := parseListQuery(c) // paging.go
	if !ok {
		return
	}
	out := []exchangeJSON{}
	for _, vh := range vhs {
		for _, x := range m.b.Exchanges(vh) {
			out = append(out, m.exchangeOf(vh, x))
		}
	}
	writeListQuery(c, lq, out)
}

func (m *mgmt) exchange(c *mgmtCall) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	x, ok := m.b.Exchange(vh, exchangeName(c.p("name")))
	if !ok {
		notFound(c.w)
		return
	}
	writeJSON(c.w, http.StatusOK, m.exchangeOf(vh, x))
}

func (m *mgmt) putExchange(c *mgmtCall) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	var body struct {
		Type       string         `json:"type"`
		Durable    flexBool       `json:"durable"`
		AutoDelete flexBool       `json:"auto_delete"`
		Internal   flexBool       `json:"internal"`
		Arguments  map[string]any `json:"arguments"`
	}
	name := exchangeName(c.p("name"))
	if !m.permit(c, vh, mgmtCheck{mgmtConfigure, "exchange", name}) || !readBody(c, &body) {
		return
	}
	if body.Type == "" {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "[{key_missing,type}]")
		return
	}
	args, ok := tableArg(c, body.Arguments)
	if !ok {
		return
	}
	_, existed := m.b.Exchange(vh, name)
	err := m.b.DeclareExchange(c.r.Context(), vh, &amqp.ExchangeDeclare{
		Exchange: name, Type: body.Type, Durable: bool(body.Durable), AutoDelete: bool(body.AutoDelete),
		Internal: bool(body.Internal), Arguments: args,
	})
	if err != nil {
		writeAMQPError(c.w, err)
		return
	}
	created(c.w, !existed)
}

// existingExchange reads the vhost and exchange named by c's path and
// checks the caller's permission perm on it; it has answered (404 for an
// exchange that does not exist, 401/403 for no permission) when ok is
// false.
func (m *mgmt) existingExchange(c *mgmtCall, perm mgmtPerm) (vh, name string, ok bool) {
	if vh, ok = m.vhostParam(c); !ok {
		return "", "", false
	}
	name = exchangeName(c.p("name"))
	if _, ok := m.b.Exchange(vh, name); !ok {
		notFound(c.w)
		return "", "", false
	}
	if !m.permit(c, vh, mgmtCheck{perm, "exchange", name}) {
		return "", "", false
	}
	return vh, name, true
}

func (m *mgmt) deleteExchange(c *mgmtCall) {
	vh, name, ok := m.existingExchange(c, mgmtConfigure)
	if !ok {
		return
	}
	noContent(c.w, m.b.DeleteExchange(c.r.Context(), vh, name, c.r.URL.Query().Get("if-unused") == "true"))
}

// Queues.

type queueJSON struct {
	Name                   string         `json:"name"`
	VHost                  string         `json:"vhost"`
	Durable                bool           `json:"durable"`
	AutoDelete             bool           `json:"auto_delete"`
	Exclusive              bool           `json:"exclusive"`
	Arguments              map[string]any `json:"arguments"`
	Node                   string         `json:"node"`
	State                  string         `json:"state"`
	Type                   string         `json:"type"`
	Messages               uint64         `json:"messages"`
	MessagesReady          uint64         `json:"messages_ready"`
	MessagesUnacknowledged uint64         `json:"messages_unacknowledged"`
	// The lengths' details, with a rate history (rates.go).
	MessagesDetails               *rates.Details `json:"messages_details,omitempty"`
	MessagesReadyDetails          *rates.Details `json:"messages_ready_details,omitempty"`
	MessagesUnacknowledgedDetails *rates.Details `json:"messages_unacknowledged_details,omitempty"`
	Consumers                     int            `json:"consumers"`
	Memory                        uint64         `json:"memory"`
	ExclusiveConsumerTag          *string        `json:"exclusive_consumer_tag"`
	MessageStats                  map[string]any `json:"message_stats"`
	policyFields
	// Only for a single queue, as in RabbitMQ.
	ConsumerDetails []consumerJSON `json:"consumer_details,omitempty"`
	// Streams only (stream.go).
	*streamJSON
}

// queueOf is q's object, with the details of its rates under rq.
func (m *mgmt) queueOf(q Queue, rq rateQueries) queueJSON {
	key := rates.QueueKey(q.VHost, q.Name)
	out := queueJSON{
		Name: q.Name, VHost: q.VHost, Durable: q.Durable, AutoDelete: q.AutoDelete,
		Exclusive: q.Exclusive, Arguments: definitions.TableJSON(q.Args), Node: m.node(), State: "running",
		Type: "classic", Messages: q.Ready + q.Unacked, MessagesReady: q.Ready, MessagesUnacknowledged: q.Unacked,
		Consumers: q.Consumers, Memory: q.Memory, policyFields: policyFieldsOf(q.Policy),
		MessageStats: messageStats(queueStats, QueueValues(q.Counters), m.details(key, rq.msg)),
	}
	if d := m.details(key, rq.lengths); d != nil {
		out.MessagesDetails, out.MessagesReadyDetails, out.MessagesUnacknowledgedDetails = &d[rates.Messages], &d[rates.MessagesReady], &d[rates.MessagesUnacknowledged]
	}
	return out.withStream(q.Stream)
}

func (m *mgmt) queues(c *mgmtCall) {
	vhs, ok := m.vhostsParam(c)
	if !ok {
		return
	}
	rq, lq, ok := listParams(c)
	if !ok {
		return
	}
	if lq.paged() && lq.byName() {
		m.queuesPage(c, vhs, lq, rq)
		return
	}
	out := []queueJSON{}
	for _, vh := range vhs {
		qs := m.b.Queues(c.r.Context(), vh)
		out = slices.Grow(out, len(qs))
		for _, q := range qs {
			out = append(out, m.queueOf(q, rq))
		}
	}
	// The exclusive consumer's tag comes from the channels.
	m.setExclusiveTags(out)
	writeListQuery(c, lq, out)
}

func (m *mgmt) exclusiveConsumers() map[[2]string]string {
	out := make(map[[2]string]string)
	for _, conn := range m.b.Connections() {
		for _, ch := range conn.Channels {
			for _, cons := range ch.Consumers {
				if cons.Exclusive {
					out[[2]string{cons.VHost, cons.Queue}] = cons.Tag
				}
			}
		}
	}
	return out
}

// queueParam returns the vhost and queue a path names, or answers 404.
func (m *mgmt) queueParam(c *mgmtCall) (string, string, bool) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return "", "", false
	}
	if !m.b.HasQueue(vh, c.p("name")) {
		notFound(c.w)
		return "", "", false
	}
	return vh, c.p("name"), true
}

func (m *mgmt) queue(c *mgmtCall) {
	vh, name, ok := m.queueParam(c)
	if !ok {
		return
	}
	rq, ok := rateQueriesOf(c)
	if !ok {
		return
	}
	q, ok := m.b.Queue(c.r.Context(), vh, name)
	if !ok {
		notFound(c.w)
		return
	}
	out := m.queueOf(q, rq)
	out.ConsumerDetails = []consumerJSON{}
	for _, cons := range m.consumerList(c, func(ci Consumer) bool { return ci.VHost == q.VHost && ci.Queue == q.Name }) {
		out.ConsumerDetails = append(out.ConsumerDetails, cons)
		if cons.Exclusive {
			tag := cons.ConsumerTag
			out.ExclusiveConsumerTag = &tag
		}
	}
	writeJSON(c.w, http.StatusOK, out)
}

func (m *mgmt) putQueue(c *mgmtCall) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	var body struct {
		Durable    flexBool       `json:"durable"`
		AutoDelete flexBool       `json:"auto_delete"`
		Arguments  map[string]any `json:"arguments"`
	}
	name := c.p("name")
	if !m.permit(c, vh, mgmtCheck{mgmtConfigure, "queue", name}) || !readBody(c, &body) {
		return
	}
	args, ok := tableArg(c, body.Arguments)
	if !ok {
		return
	}
	existed := m.b.HasQueue(vh, name)
	// The management API declares no exclusive queues; redeclaring one
	// fails with 405 RESOURCE_LOCKED (400 here), as in RabbitMQ.
	err := m.b.DeclareQueue(c.r.Context(), vh, &amqp.QueueDeclare{Queue: name, Durable: bool(body.Durable), AutoDelete: bool(body.AutoDelete), Arguments: args})
	if err != nil {
		writeAMQPError(c.w, err)
		return
	}
	created(c.w, !existed)
}

func (m *mgmt) deleteQueue(c *mgmtCall) {
	vh, name, ok := m.queueParam(c)
	if !ok || !m.permit(c, vh, mgmtCheck{mgmtConfigure, "queue", name}) {
		return
	}
	query := c.r.URL.Query()
	// As a connection of its own, the API cannot delete another
	// connection's exclusive queue (405 RESOURCE_LOCKED).
	noContent(c.w, m.b.DeleteQueue(c.r.Context(), vh, name, query.Get("if-unused") == "true", query.Get("if-empty") == "true"))
}

func (m *mgmt) purge(c *mgmtCall) {
	vh, name, ok := m.queueParam(c)
	if !ok || !m.permit(c, vh, mgmtCheck{mgmtRead, "queue", name}) {
		return
	}
	// Another connection's exclusive queue is 405; a queue gone since is
	// 404.
	noContent(c.w, m.b.Purge(c.r.Context(), vh, name))
}

// getResult is one message of a get's answer without its payload, which
// writeGetResult streams after these fields.
type getResult struct {
	PayloadBytes int            `json:"payload_bytes"`
	Redelivered  bool           `json:"redelivered"`
	Exchange     string         `json:"exchange"`
	RoutingKey   string         `json:"routing_key"`
	MessageCount uint64         `json:"message_count"`
	Properties   map[string]any `json:"properties"`
}

// getAckModes maps RabbitMQ's ackmode to basic.get's no-ack and what is
// done with each message got: rejected (with requeue) or not.
var getAckModes = map[string]struct{ noAck, reject, requeue bool }{
	"ack_requeue_false":    {noAck: true},
	"ack_requeue_true":     {},
	"reject_requeue_true":  {reject: true, requeue: true},
	"reject_requeue_false": {reject: true},
}

// getMax bounds count: each message got is held in the response.
const getMax = 10000

// get is RabbitMQ's rabbit_mgmt_wm_queue_get: count basic.gets on a direct
// channel of the requesting user, the rejects the ackmode asks for once
// all are got (rejecting each at once would get the same message again),
// then the channel is closed, which requeues what is still unacked.
//
// Unlike RabbitMQ, which builds the whole answer first, each message is
// encoded and written as it is got, so a request holds one message at a
// time however many it asks for and however large they are. truncate
// (RabbitMQ's: payload cut to that many bytes before encoding,
// payload_bytes still the full size) shrinks what goes out. Once the first
// message is out the status is sent: a failure after that aborts the
// response (the client sees a broken body, never a short list that looks
// whole), and closing the channel requeues whatever was got with an ack
// pending.
func (m *mgmt) get(c *mgmtCall) {
	vh, queueName, ok := m.queueParam(c)
	if !ok {
		return
	}
	var body struct {
		Count    *flexInt `json:"count"`
		AckMode  string   `json:"ackmode"`
		Encoding string   `json:"encoding"`
		Truncate *flexInt `json:"truncate"`
	}
	if !readBody(c, &body) {
		return
	}
	if refuseMissing(c.w, bodyKey{"count", body.Count != nil}, bodyKey{"ackmode", body.AckMode != ""},
		bodyKey{"encoding", body.Encoding != ""}) {
		return
	}
	mode, ok := getAckModes[body.AckMode]
	if !ok {
		WriteError(c.w, http.StatusBadRequest, "bad_request", fmt.Sprintf("unknown ackmode %q", body.AckMode))
		return
	}
	if body.Encoding != "auto" && body.Encoding != "base64" {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "Unsupported encoding. Please use auto or base64.")
		return
	}
	// As RabbitMQ's with_channel: a direct connection as the requesting
	// user, with that user's permissions.
	ch, err := m.b.OpenChannel(c.r.Context(), c.user.Name, vh)
	if err != nil {
		writeChannelError(c.w, err)
		return
	}
	defer ch.Close()
	n := min(max(int(*body.Count), 0), getMax)
	var out *bufio.Writer // set once the first message is out
	fail := func(err error) {
		if out == nil {
			writeAMQPError(c.w, fromAMQP091Error(err))
			return
		}
		_ = ch.Close() // requeues what is unacked before the client hears
		panic(http.ErrAbortHandler)
	}
	var tags []uint64
	for range n {
		d, ok, err := ch.Get(queueName, mode.noAck)
		if err != nil {
			fail(err)
			return
		}
		if !ok {
			break
		}
		tags = append(tags, d.DeliveryTag)
		if out == nil {
			c.w.Header().Set("Content-Type", "application/json")
			c.w.WriteHeader(http.StatusOK)
			out = bufio.NewWriterSize(c.w, 32<<10)
			out.WriteByte('[')
		} else {
			out.WriteByte(',')
		}
		payload := d.Body
		if tr := body.Truncate; tr != nil && *tr >= 0 && len(payload) > int(*tr) {
			payload = payload[:*tr]
		}
		writeGetResult(out, getResult{
			PayloadBytes: len(d.Body), Redelivered: d.Redelivered,
			Exchange: d.Exchange, RoutingKey: d.RoutingKey, MessageCount: uint64(d.MessageCount),
			Properties: propertiesJSON(amqpconv.DeliveryPublishing(&d)),
		}, payload, body.Encoding == "auto" && utf8.Valid(payload))
	}
	if mode.reject {
		for _, tag := range tags {
			if err := ch.Reject(tag, mode.requeue); err != nil {
				fail(err)
				return
			}
		}
	}
	// Closing requeues what ack_requeue_true left unacked, before the
	// response is complete: a client that reacts to it finds them back.
	if err := ch.Close(); err != nil {
		fail(err)
		return
	}
	if out == nil {
		writeJSON(c.w, http.StatusOK, []getResult{})
		return
	}
	out.WriteByte(']')
	_ = out.Flush()
}

// writeGetResult writes one message of a get's answer: r's fields, then
// the payload as a JSON string (asString: it is valid UTF-8 and encoding
// is auto) or in base64, encoded straight into w so that no second copy of
// a large payload is made. Write errors are the client's going away; the
// get finishes and its channel's close settles the messages.
func writeGetResult(w *bufio.Writer, r getResult, payload []byte, asString bool) {
	head, _ := json.Marshal(r) // plain fields and a properties map: cannot fail
	w.Write(head[:len(head)-1])
	w.WriteString(`,"payload":"`)
	if asString {
		writeJSONStringBody(w, payload)
		w.WriteString(`","payload_encoding":"string"}`)
		return
	}
	enc := base64.NewEncoder(base64.StdEncoding, w)
	enc.Write(payload)
	enc.Close()
	w.WriteString(`","payload_encoding":"base64"}`)
}

// writeJSONStringBody writes valid UTF-8 s as the inside of a JSON string:
// quote, backslash and control characters escaped, and U+2028 and U+2029
// too, as encoding/json does, for readers that are JavaScript.
func writeJSONStringBody(w *bufio.Writer, s []byte) {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' && b < utf8.RuneSelf {
			i++
			continue
		}
		if b >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r != '\u2028' && r != '\u2029' {
				i += size
				continue
			}
			w.Write(s[start:i])
			w.WriteString(`\u202`)
			w.WriteByte(hex[r&0xf])
			i += size
			start = i
			continue
		}
		w.Write(s[start:i])
		switch b {
		case '"', '\\':
			w.WriteByte('\\')
			w.WriteByte(b)
		case '\n':
			w.WriteString(`\n`)
		case '\r':
			w.WriteString(`\r`)
		case '\t':
			w.WriteString(`\t`)
		default:
			w.WriteString(`\u00`)
			w.WriteByte(hex[b>>4])
			w.WriteByte(hex[b&0xf])
		}
		i++
		start = i
	}
	w.Write(s[start:])
}

// writeChannelError answers a direct Channel that could not be opened as
// RabbitMQ's with_channel answers a refused direct connection: no
// permissions on the vhost is 401 "Access refused.", a user store that
// did not answer 503 (as a login then is), anything else as its AMQP code.
func writeChannelError(w http.ResponseWriter, err error) {
	var e *amqp091.Error
	switch {
	case errors.As(err, &e) && e.Code == amqp091.NotAllowed:
		WriteError(w, http.StatusUnauthorized, "not_authorised", "Access refused.")
	case errors.As(err, &e) && e.Code == amqp091.ConnectionForced:
		WriteError(w, http.StatusServiceUnavailable, "service_unavailable", "cannot authenticate now: the user store did not answer; try again, or another cluster member")
	default:
		writeAMQPError(w, fromAMQP091Error(err))
	}
}

// fromAMQP091Error turns a direct Channel's error back into the
// *amqp.Error writeAMQPError maps to an HTTP status.
func fromAMQP091Error(err error) error {
	var e *amqp091.Error
	if errors.As(err, &e) {
		return &amqp.Error{Code: uint16(e.Code), Text: e.Reason}
	}
	return err
}

// propertiesJSON lists the properties a publisher set, with RabbitMQ's
// names.
func propertiesJSON(p amqp091.Publishing) map[string]any {
	out := map[string]any{}
	set := func(k string, v string) {
		if v != "" {
			out[k] = v
		}
	}
	set("content_type", p.ContentType)
	set("content_encoding", p.ContentEncoding)
	set("correlation_id", p.CorrelationId)
	set("reply_to", p.ReplyTo)
	set("expiration", p.Expiration)
	set("message_id", p.MessageId)
	set("type", p.Type)
	set("user_id", p.UserId)
	set("app_id", p.AppId)
	if p.DeliveryMode != 0 {
		out["delivery_mode"] = p.DeliveryMode
	}
	if p.Priority != 0 {
		out["priority"] = p.Priority
	}
	if !p.Timestamp.IsZero() {
		out["timestamp"] = p.Timestamp.Unix()
	}
	if len(p.Headers) > 0 {
		h := make(amqp.Table, len(p.Headers))
		for k, v := range p.Headers {
			h[k] = v
		}
		out["headers"] = definitions.TableJSON(h)
	}
	return out
}

// Bindings.

// bindingJSON is a binding as the management API lists it: as the
// definitions file carries it, and the key that names it in URLs.
type bindingJSON struct {
	definitions.Binding
	PropertiesKey string `json:"properties_key"`
}

// allBindings lists a vhost's bindings as RabbitMQ does: the default
// exchange's implicit binding of every queue first, then the declared ones.
func (m *mgmt) allBindings(vh string) []bindingJSON {
	var out []bindingJSON
	for _, q := range m.b.QueueNames(vh) {
		out = append(out, bindingOf(vh, routing.Binding{Destination: routing.Destination{Name: q}, Key: q}))
	}
	for _, bd := range m.b.Bindings(vh) {
		out = append(out, bindingOf(vh, bd))
	}
	return out
}

func bindingOf(vhostName string, bd routing.Binding) bindingJSON {
	return bindingJSON{Binding: definitions.BindingOf(vhostName, bd), PropertiesKey: propertiesKey(bd.Key, bd.Args)}
}

// propertiesKey names a binding in URLs the way RabbitMQ does: the routing
// key quoted as in a form ("~" for an empty key), followed by "~" and a
// hash of the arguments when there are any. RabbitMQ hashes the Erlang
// term; Warren hashes its own canonical encoding, so the keys differ from
// RabbitMQ's but are stable and only ever round-trip through a listing.
func propertiesKey(key string, args amqp.Table) string {
	k := quotePlus(key)
	if len(args) == 0 {
		if k == "" {
			return "~"
		}
		return k
	}
	enc, _ := json.Marshal(definitions.TableJSON(args)) // maps marshal with sorted keys
	h := fnv.New32a()
	h.Write(enc)
	return k + "~" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// quotePlus is RabbitMQ's quote_plus: letters, digits and "-_." stay, a
// space becomes "+", everything else %XX.
func quotePlus(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
			sb.WriteByte(c)
		case c == ' ':
			sb.WriteByte('+')
		default:
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

func (m *mgmt) bindings(c *mgmtCall) {
	vhs, ok := m.vhostsParam(c)
	if !ok {
		return
	}
	out := []bindingJSON{}
	for _, vh := range vhs {
		out = append(out, m.allBindings(vh)...)
	}
	writeJSON(c.w, http.StatusOK, out)
}

func (m *mgmt) queueBindings(c *mgmtCall) {
	vh, name, ok := m.queueParam(c)
	if !ok {
		return
	}
	out := []bindingJSON{}
	for _, bd := range m.allBindings(vh) {
		if bd.DestinationType == "queue" && bd.Destination == name {
			out = append(out, bd)
		}
	}
	writeJSON(c.w, http.StatusOK, out)
}

// bindingEnds resolves the source and destination a binding path names,
// answering 404 when either is missing.
func (m *mgmt) bindingEnds(c *mgmtCall, kind string) (string, routing.Binding, bool) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return "", routing.Binding{}, false
	}
	src := exchangeName(c.p("source"))
	dst := routing.Destination{Name: c.p("dest"), Exchange: kind == "e"}
	if dst.Exchange {
		dst.Name = exchangeName(dst.Name)
	}
	_, srcOK := m.b.Exchange(vh, src)
	dstOK := false
	if dst.Exchange {
		_, dstOK = m.b.Exchange(vh, dst.Name)
	} else {
		dstOK = m.b.HasQueue(vh, dst.Name)
	}
	if !srcOK || !dstOK {
		notFound(c.w)
		return "", routing.Binding{}, false
	}
	return vh, routing.Binding{Source: src, Destination: dst}, true
}

func (m *mgmt) between(vh string, b routing.Binding) []bindingJSON {
	out := []bindingJSON{}
	ends := definitions.BindingOf(vh, b)
	for _, bd := range m.allBindings(vh) {
		if bd.Source == ends.Source && bd.Destination == ends.Destination && bd.DestinationType == ends.DestinationType {
			out = append(out, bd)
		}
	}
	return out
}

func (m *mgmt) bindingsBetween(kind string) func(*mgmtCall) {
	return func(c *mgmtCall) {
		vh, b, ok := m.bindingEnds(c, kind)
		if !ok {
			return
		}
		writeJSON(c.w, http.StatusOK, m.between(vh, b))
	}
}

func (m *mgmt) postBinding(kind string) func(*mgmtCall) {
	return func(c *mgmtCall) {
		vh, b, ok := m.bindingEnds(c, kind)
		if !ok {
			return
		}
		var body struct {
			RoutingKey string         `json:"routing_key"`
			Arguments  map[string]any `json:"arguments"`
		}
		if !m.permit(c, vh, bindChecks(b)...) || !readBody(c, &body) {
			return
		}
		args, ok := tableArg(c, body.Arguments)
		if !ok {
			return
		}
		b.Key, b.Args = body.RoutingKey, args
		// As a connection of its own: another connection's exclusive
		// queue is 405 RESOURCE_LOCKED, as over AMQP.
		if err := m.b.Bind(c.r.Context(), vh, b); err != nil {
			writeAMQPError(c.w, err)
			return
		}
		// Location is relative to the request URL, as RabbitMQ sends it.
		c.w.Header().Set("Location", url.PathEscape(c.p("dest"))+"/"+propertiesKey(b.Key, b.Args))
		c.w.WriteHeader(http.StatusCreated)
	}
}

// bindChecks are the permissions a bind or unbind needs, as AMQP's
// binding_action checks them: write on the destination, read on the source.
func bindChecks(b routing.Binding) []mgmtCheck {
	kind := "queue"
	if b.Destination.Exchange {
		kind = "exchange"
	}
	return []mgmtCheck{{mgmtWrite, kind, b.Destination.Name}, {mgmtRead, "exchange", b.Source}}
}

// findBinding returns the binding a props path segment names.
func (m *mgmt) findBinding(c *mgmtCall, kind string) (string, routing.Binding, bool) {
	vh, b, ok := m.bindingEnds(c, kind)
	if !ok {
		return "", routing.Binding{}, false
	}
	props := c.p("props")
	for _, bd := range m.b.Bindings(vh) {
		if bd.Source == b.Source && bd.Destination == b.Destination && propertiesKey(bd.Key, bd.Args) == props {
			return vh, bd, true
		}
	}
	if b.Source == "" && !b.Destination.Exchange && props == propertiesKey(b.Destination.Name, nil) {
		return vh, routing.Binding{Destination: b.Destination, Key: b.Destination.Name}, true
	}
	notFound(c.w)
	return "", routing.Binding{}, false
}

func (m *mgmt) binding(kind string) func(*mgmtCall) {
	return func(c *mgmtCall) {
		vh, bd, ok := m.findBinding(c, kind)
		if !ok {
			return
		}
		writeJSON(c.w, http.StatusOK, bindingOf(vh, bd))
	}
}

func (m *mgmt) deleteBinding(kind string) func(*mgmtCall) {
	return func(c *mgmtCall) {
		vh, bd, ok := m.findBinding(c, kind)
		if !ok || !m.permit(c, vh, bindChecks(bd)...) {
			return
		}
		noContent(c.w, m.b.Unbind(c.r.Context(), vh, bd))
	}
}

// Connections, channels, consumers.

// visibleConns lists the connections the user may see: all of them for
// administrator and monitoring, else the user's own.
func (m *mgmt) visibleConns(c *mgmtCall) []Connection {
	var out []Connection
	for _, conn := range m.b.Connections() {
		if c.all || conn.User == c.user.Name {
			out = append(out, conn)
		}
	}
	return out
}

func hostPort(a net.Addr) (string, int) {
	if a == nil {
		return "", 0
	}
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), 0
	}
	p, _ := strconv.Atoi(port)
	return host, p
}

// peerOf is the peer_host and peer_port of channel and consumer details:
// "unknown" for a direct connection, as in RabbitMQ.
func peerOf(in Connection) (any, any) {
	if in.Direct {
		return "unknown", "unknown"
	}
	return hostPort(in.Peer)
}

func (m *mgmt) connectionJSON(in Connection, rq rateQueries) map[string]any {
	out := map[string]any{
		"name": in.ID, "node": m.node(), "vhost": in.VHost, "user": in.User, "state": in.State,
		"channels": in.ChannelCount, "client_properties": definitions.TableJSON(in.ClientProperties),
	}
	if !in.ConnectedAt.IsZero() {
		out["connected_at"] = in.ConnectedAt.UnixMilli()
	}
	if name, ok := in.ClientProperties["connection_name"].(string); ok {
		out["user_provided_name"] = name
	}
	if in.Direct {
		// What RabbitMQ shows for a direct (Erlang client) connection
		// without adapter info (amqp_direct_connection): type direct,
		// protocol {'Direct', {0,9,1}}, and the socket ends unknown. It
		// has no socket, so no tuning, byte counts or ssl.
		unknown := "unknown"
		out["type"], out["protocol"] = "direct", "Direct 0-9-1"
		out["host"], out["port"], out["peer_host"], out["peer_port"] = unknown, unknown, unknown, unknown
		return out
	}
	peerHost, peerPort := hostPort(in.Peer)
	host, port := hostPort(in.Local)
	out["type"], out["protocol"], out["ssl"] = "network", "AMQP 0-9-1", false
	out["host"], out["port"], out["peer_host"], out["peer_port"] = host, port, peerHost, peerPort
	out["channel_max"], out["frame_max"] = in.ChannelMax, in.FrameMax
	out["timeout"] = int(in.Heartbeat / time.Second)
	out["recv_oct"], out["send_oct"] = in.RecvOct, in.SendOct
	if d := m.details(rates.ConnKey(in.ID), rq.data); d != nil {
		out["recv_oct_details"], out["send_oct_details"] = d[rates.RecvOct], d[rates.SendOct]
	}
	return out
}

func (m *mgmt) connections(c *mgmtCall) {
	rq, lq, ok := listParams(c)
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, v := range m.visibleConns(c) {
		out = append(out, m.connectionJSON(v, rq))
	}
	writeListQuery(c, lq, out)
}

func (m *mgmt) findConn(c *mgmtCall) (Connection, bool) {
	for _, v := range m.visibleConns(c) {
		if v.ID == c.p("name") {
			return v, true
		}
	}
	notFound(c.w)
	return Connection{}, false
}

func (m *mgmt) connection(c *mgmtCall) {
	rq, ok := rateQueriesOf(c)
	if !ok {
		return
	}
	if v, ok := m.findConn(c); ok {
		writeJSON(c.w, http.StatusOK, m.connectionJSON(v, rq))
	}
}

// deleteConnection closes a connection as RabbitMQ's management plugin
// does: 320 CONNECTION_FORCED, with the X-Reason header as the text.
func (m *mgmt) deleteConnection(c *mgmtCall) {
	v, ok := m.findConn(c)
	if !ok {
		return
	}
	// Seeing a connection is not closing it: monitoring sees every
	// connection but closes only its own (RabbitMQ's is_authorized_user).
	if v.User != c.user.Name && !HasTag(c.user, "administrator") {
		WriteError(c.w, http.StatusUnauthorized, "not_authorised", "User not authorised to access object")
		return
	}
	reason := c.r.Header.Get("X-Reason")
	if reason == "" {
		reason = "Closed via management plugin"
	}
	m.b.CloseConnection(v.ID, amqp.ConnectionForced, reason)
	c.w.WriteHeader(http.StatusNoContent)
}

func channelName(connID string, n uint16) string { return fmt.Sprintf("%s (%d)", connID, n) }

func (m *mgmt) channelJSON(v Connection, ch Channel) map[string]any {
	peerHost, peerPort := peerOf(v)
	state := "running"
	if ch.Closing {
		state = "closing"
	}
	return map[string]any{
		"name": channelName(v.ID, ch.Number), "number": ch.Number, "node": m.node(),
		"vhost": v.VHost, "user": v.User, "state": state,
		"connection_details": map[string]any{"name": v.ID, "peer_host": peerHost, "peer_port": peerPort},
		"consumer_count":     len(ch.Consumers), "messages_unacknowledged": ch.Unacked,
		"messages_unconfirmed": ch.Unconfirmed, "prefetch_count": ch.Prefetch,
		"global_prefetch_count": ch.GlobalPrefetch, "confirm": ch.Confirm, "transactional": ch.Transactional,
	}
}

func (m *mgmt) allChannels(c *mgmtCall, only func(Connection) bool) []map[string]any {
	out := []map[string]any{}
	for _, v := range m.visibleConns(c) {
		if only != nil && !only(v) {
			continue
		}
		for _, ch := range v.Channels {
			out = append(out, m.channelJSON(v, ch))
		}
	}
	return out
}

func (m *mgmt) channels(c *mgmtCall) {
	lq, ok := parseListQuery(c) // paging.go
	if !ok {
		return
	}
	writeListQuery(c, lq, m.allChannels(c, nil))
}

func (m *mgmt) connectionChannels(c *mgmtCall) {
	if _, ok := m.findConn(c); !ok {
		return
	}
	writeJSON(c.w, http.StatusOK, m.allChannels(c, func(v Connection) bool { return v.ID == c.p("name") }))
}

func (m *mgmt) channel(c *mgmtCall) {
	for _, ch := range m.allChannels(c, nil) {
		if ch["name"] == c.p("name") {
			writeJSON(c.w, http.StatusOK, ch)
			return
		}
	}
	notFound(c.w)
}

type consumerJSON struct {
	Arguments      map[string]any `json:"arguments"`
	AckRequired    bool           `json:"ack_required"`
	Active         bool           `json:"active"`
	ActivityStatus string         `json:"activity_status"`
	ChannelDetails map[string]any `json:"channel_details"`
	ConsumerTag    string         `json:"consumer_tag"`
	Exclusive      bool           `json:"exclusive"`
	PrefetchCount  uint16         `json:"prefetch_count"`
	Queue          map[string]any `json:"queue"`
}

func (m *mgmt) consumerList(c *mgmtCall, only func(Consumer) bool) []consumerJSON {
	out := []consumerJSON{}
	for _, v := range m.visibleConns(c) {
		peerHost, peerPort := peerOf(v)
		for _, ch := range v.Channels {
			for _, cons := range ch.Consumers {
				if only != nil && !only(cons) {
					continue
				}
				out = append(out, consumerJSON{
					Arguments: map[string]any{}, AckRequired: !cons.NoAck, Active: true, ActivityStatus: "up",
					ChannelDetails: map[string]any{
						"connection_name": v.ID, "name": channelName(v.ID, ch.Number), "node": m.node(),
						"number": ch.Number, "peer_host": peerHost, "peer_port": peerPort, "user": v.User,
					},
					ConsumerTag: cons.Tag, Exclusive: cons.Exclusive, PrefetchCount: cons.Prefetch,
					Queue: map[string]any{"name": cons.Queue, "vhost": cons.VHost},
				})
			}
		}
	}
	return out
}

func (m *mgmt) consumers(c *mgmtCall) {
	var only func(Consumer) bool
	if _, ok := c.params["vhost"]; ok {
		vh, ok := m.vhostParam(c)
		if !ok {
			return
		}
		only = func(ci Consumer) bool { return ci.VHost == vh }
	}
	writeJSON(c.w, http.StatusOK, m.consumerList(c, only))
}

// Definitions.

func (m *mgmt) definitions(c *mgmtCall) {
	d, err := m.b.ExportDefinitions(c.r.Context())
	if err != nil {
		writeAMQPError(c.w, err)
		return
	}
	writeJSON(c.w, http.StatusOK, d)
}

func (m *mgmt) postDefinitions(c *mgmtCall) {
	var d definitions.File
	if !readBodyMax(c, &d, mgmtMaxDefinitionsBody) {
		return
	}
	if err := m.b.ImportDefinitions(c.r.Context(), &d); err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}

// remoteAddr is the request's peer as a net.Addr for the login throttle.
func remoteAddr(r *http.Request) net.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return nil
	}
	return net.TCPAddrFromAddrPort(ap)
}
