package session

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/warrenmq/broker/amqp"
)

// mechanisms is the mechanisms field of connection.start: SASL names
// separated by spaces, preferred first (RabbitMQ's order).
const mechanisms = "PLAIN AMQPLAIN"

// credentials extracts user and password from a start-ok response. A
// response that does not parse is a 502 SYNTAX_ERROR, as RabbitMQ answers;
// an unknown mechanism is 503 COMMAND_INVALID (RabbitMQ's
// auth_mechanism_to_module).
func credentials(mechanism, response string) (user, password string, err *amqp.Error) {
	cls, mth := amqp.ClassConnection, amqp.MethodConnectionStartOk
	switch mechanism {
	case "PLAIN":
		// RFC 4616: [authzid] NUL authcid NUL passwd.
		authz, rest, ok := strings.Cut(response, "\x00")
		if !ok {
			return "", "", amqp.NewError(amqp.SyntaxError, cls, mth, "PLAIN response is not [authzid] NUL user NUL password")
		}
		user, password, ok = strings.Cut(rest, "\x00")
		if !ok || strings.Contains(password, "\x00") {
			return "", "", amqp.NewError(amqp.SyntaxError, cls, mth, "PLAIN response is not [authzid] NUL user NUL password")
		}
		// Acting as another identity (authzid) is not supported; naming
		// oneself is harmless.
		if authz != "" && authz != user {
			return "", "", amqp.NewError(amqp.AccessRefused, cls, mth, "PLAIN authorization identity %q is not supported", authz)
		}
		return user, password, nil
	case "AMQPLAIN":
		// The response is a field table without its length prefix (RabbitMQ's
		// rabbit_auth_mechanism_amqplain): LOGIN and PASSWORD long strings.
		buf := make([]byte, 4, 4+len(response))
		binary.BigEndian.PutUint32(buf, uint32(len(response)))
		buf = append(buf, response...)
		t, _, derr := amqp.DecodeTable(buf)
		if derr != nil {
			return "", "", amqp.NewError(amqp.SyntaxError, cls, mth, "AMQPLAIN response is not a field table: %v", derr)
		}
		var okUser, okPass bool
		user, okUser = tableString(t, "LOGIN")
		password, okPass = tableString(t, "PASSWORD")
		if !okUser || !okPass {
			return "", "", amqp.NewError(amqp.SyntaxError, cls, mth, "AMQPLAIN response lacks LOGIN or PASSWORD")
		}
		return user, password, nil
	}
	return "", "", amqp.NewError(amqp.CommandInvalid, cls, mth, "unknown authentication mechanism %q (supported: %s)", mechanism, mechanisms)
}

// tableString reads a string-valued field stored as a long string or bytes.
func tableString(t amqp.Table, key string) (string, bool) {
	switch v := t[key].(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	}
	return "", false
}

// Grant is one user's permissions on one vhost: RabbitMQ's configure, write
// and read regular expressions, compiled by whoever builds it. They match
// unanchored, as RabbitMQ's do ("orders" also grants "my-orders"); the
// builder turns "" into ^$. A nil field refuses everything of that kind.
type Grant struct {
	Configure, Write, Read *regexp.Regexp
}

// Access is where a connection finds its user's current Grant on its vhost.
// The broker shares one Access per (user, vhost) with every connection of
// that user there, so Admin.PutPermission and Admin.DeletePermission apply to open
// connections at once, at the cost of one atomic load per check. Safe for
// concurrent use.
type Access struct {
	user  string
	vhost string
	cur   atomic.Pointer[Grant]
	// topics are the user's topic permissions on the vhost (topicauth.go),
	// nil for none; apart from cur, so Admin.PutPermission leaves them alone.
	topics atomic.Pointer[TopicGrants]
	// authz, when set, decides instead of cur and topics (authz.go).
	authz *Authz
}

// NewAccess returns the Access of user on vhost holding g (nil: no access).
func NewAccess(user, vhost string, g *Grant) *Access {
	a := &Access{user: user, vhost: vhost}
	a.cur.Store(g)
	return a
}

// Set replaces the grant; nil refuses everything.
func (a *Access) Set(g *Grant) { a.cur.Store(g) }

// Grant returns the current grant, nil when there is none.
func (a *Access) Grant() *Grant { return a.cur.Load() }

// permKind is a permission kind: RabbitMQ's configure, write or read.
type permKind uint8

const (
	permConfigure permKind = iota
	permWrite
	permRead
)

// check reports whether the current grant allows kind on the resource, and
// otherwise RabbitMQ's 403 ACCESS_REFUSED text (rabbit_access_control:
// "access to queue 'q' in vhost '/' refused for user 'u'"). A nil Access
// allows everything: connection-only mode, direct connections and brokers
// without accounts.
func (a *Access) check(kind permKind, resource, name string, m amqp.Method) error {
	if a == nil {
		return nil
	}
	if resource == "exchange" && name == "" {
		// rabbit_access_control checks the default exchange under the
		// name amq.default.
		name = "amq.default"
	}
	if a.allows(a.cur.Load(), kind, name) {
		return nil
	}
	var cls, mth uint16
	if m != nil {
		cls, mth = m.ClassID(), m.MethodID()
	}
	return amqp.NewError(amqp.AccessRefused, cls, mth, "access to %s '%s' in vhost '%s' refused for user '%s'", resource, name, a.vhost, a.user)
}

func (a *Access) allows(g *Grant, kind permKind, name string) bool {
	if g == nil {
		return false
	}
	var re *regexp.Regexp
	switch kind {
	case permConfigure:
		re = g.Configure
	case permWrite:
		re = g.Write
	case permRead:
		re = g.Read
	}
	return re != nil && re.MatchString(name)
}

// accessCache remembers the last name one kind of check allowed, and under
// which grant, so a stream of publishes to one exchange or of basic.gets
// from one queue costs a pointer and a string comparison, not a regexp
// match (RabbitMQ's channels cache their permission checks too). A changed
// grant is a new pointer, so Admin.PutPermission takes effect on the next check.
// Owned by the goroutine that handles the connection's methods.
type accessCache struct {
	grant *Grant
	name  string
}

// checkCached is (*Access).check through cache, for the checks that repeat
// on every message: basic.publish's write and basic.get's read.
func (c *Conn) checkCached(cache *accessCache, kind permKind, resource, name string, m amqp.Method) error {
	a := c.access
	if a == nil {
		return nil
	}
	if a.authz != nil {
		return c.check(kind, resource, name, m) // its own cache
	}
	g := a.cur.Load()
	if g != nil && g == cache.grant && name == cache.name {
		return nil
	}
	if err := a.check(kind, resource, name, m); err != nil {
		return err
	}
	*cache = accessCache{grant: g, name: name}
	return nil
}

// checkPublish is (*Access).check for basic.publish with the cache.
func (c *Conn) checkPublish(m *amqp.BasicPublish) error {
	return c.checkCached(&c.pubCache, permWrite, "exchange", m.Exchange, m)
}

// LoginAttempt is what Config.Login is told about a connection.start-ok.
type LoginAttempt struct {
	Mechanism string
	// User and Password are the PLAIN / AMQPLAIN credentials; for EXTERNAL,
	// User is the client certificate's subject common name and Password is
	// empty.
	User, Password string
	// Peer is the client's address when the transport is a net.Conn, nil
	// otherwise. In-process connections (Broker.Dial's pipe) report a pipe address.
	Peer net.Addr
	// TLS is the handshake state when the transport is TLS, nil otherwise.
	TLS *tls.ConnectionState
	// Internal: the broker marked the connection as its own (MarkInternal).
	Internal bool

	// Authz is set by Config.Login when a backend other than the user
	// database let the user in: it decides the connection's permissions
	// and is handed to Config.Open; its Identity's User, when set, is the
	// connection's user. nil: the user database decides.
	Authz *Authz
	// Expires is set by a Config.Login that accepted a credential which
	// stops being valid then (an OAuth 2 token's exp); zero: never. The
	// connection is closed at that time unless update-secret extends it
	// (expiry.go).
	Expires time.Time
}

// externalUser returns the user name EXTERNAL authenticates: the subject
// common name of the client's verified certificate (RabbitMQ's default
// ssl_cert_login_from = common_name). A certificate the server only
// requested (tls.RequestClientCert) and did not verify against ClientCAs
// proves nothing and is ignored.
func externalUser(st *tls.ConnectionState) (string, bool) {
	if st == nil || len(st.PeerCertificates) == 0 || len(st.VerifiedChains) == 0 {
		return "", false
	}
	cn := st.PeerCertificates[0].Subject.CommonName
	return cn, cn != ""
}

// offeredMechanisms is connection.start's mechanisms field for this
// connection: EXTERNAL first when configured and the client presented a
// certificate, as RabbitMQ lists it once rabbitmq_auth_mechanism_ssl is on.
func (c *Conn) offeredMechanisms() string {
	if c.cfg.External {
		if _, ok := externalUser(c.tr.Peer().TLS); ok {
			return "EXTERNAL " + mechanisms
		}
	}
	return mechanisms
}

// login authenticates a start-ok and returns the user, or the 403 (or 502,
// 503) to close the connection with.
func (c *Conn) login(m *amqp.ConnectionStartOk) (string, error) {
	peer := c.tr.Peer()
	at := LoginAttempt{Mechanism: m.Mechanism, TLS: peer.TLS, Peer: peer.Remote, Internal: c.internal}
	if m.Mechanism == "EXTERNAL" && c.cfg.External {
		user, ok := externalUser(at.TLS)
		if !ok {
			return "", amqp.NewError(amqp.AccessRefused, m.ClassID(), m.MethodID(), "EXTERNAL login refused: no peer certificate")
		}
		at.User = user
	} else {
		user, password, aerr := credentials(m.Mechanism, m.Response)
		if aerr != nil {
			return "", aerr
		}
		at.User, at.Password = user, password
	}
	refused := func(reason string) error {
		logged := reason
		if logged == "" {
			// The client is not told why (see below); the log is.
			// RabbitMQ's text for a wrong password or unknown user.
			logged = "invalid credentials"
		}
		c.log.Warn("session: login refused", "user", LogName(at.User), "mechanism", m.Mechanism, "reason", logged)
		// Closing with 403 instead of dropping the socket is what the
		// authentication_failure_close capability promises; a client that
		// asked for it gets RabbitMQ's safe text (auth_fail), which does not
		// say whether the user exists; the reason goes to the log.
		caps, _ := c.clientProperties["capabilities"].(amqp.Table)
		if safe, _ := caps["authentication_failure_close"].(bool); safe || reason == "" {
			return amqp.NewError(amqp.AccessRefused, m.ClassID(), m.MethodID(),
				"Login was refused using authentication mechanism %s. For details see the broker logfile.", m.Mechanism)
		}
		return amqp.NewError(amqp.AccessRefused, m.ClassID(), m.MethodID(), "%s login refused: %s", m.Mechanism, reason)
	}
	switch {
	case c.cfg.Login != nil:
		ok, reason, err := c.cfg.Login(&at)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", refused(reason)
		}
		if at.Authz != nil {
			c.authz = at.Authz
			if at.Authz.Identity.User != "" {
				at.User = at.Authz.Identity.User
			}
		}
		c.credExpires = at.Expires
	case c.cfg.Authenticate != nil && m.Mechanism != "EXTERNAL":
		if !c.cfg.Authenticate(at.User, at.Password) {
			return "", refused("")
		}
	default:
		return "", refused("no authentication backend")
	}
	return at.User, nil
}

// maxLoggedName is how much of a user name a log line carries: a name
// longer than any real one (AMQP short strings stop at 255 bytes, and so
// do Warren's user names) is an attack on the log, not a user.
const maxLoggedName = 255

// LogName returns name as log lines carry it: at most maxLoggedName bytes
// (cut at a UTF-8 boundary), followed by a marker giving the full length
// when it was cut.
func LogName(name string) string {
	if len(name) <= maxLoggedName {
		return name
	}
	cut := maxLoggedName
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "...(truncated, " + strconv.Itoa(len(name)) + " bytes)"
}

// handleUpdateSecret answers connection.update-secret, which clients send
// to refresh an expiring credential (an OAuth2 token) without reconnecting.
// It copies RabbitMQ 3.10 to 4.x with its internal user database:
// rabbit_access_control:update_state asks only the backends whose
// credentials can expire (state_can_expire / expiry_timestamp) to check
// the new secret, and the internal database's never do. So the secret is
// not verified and nothing is re-checked: the user's existence, tags and
// permissions are not looked up again, because Warren, like RabbitMQ, keeps
// them current on open connections already (Admin.PutPermission and
// Admin.DeletePermission change the shared Access; DeleteUser closes the user's
// connections with 320 CONNECTION_FORCED). The new secret is not kept:
// a later login still needs the user's password.
//
// A connection whose credential expires is the exception: its new secret
// is checked (checkNewSecret, expiry.go), as the backends that issued it
// check it in RabbitMQ.
func (c *Conn) handleUpdateSecret(m *amqp.ConnectionUpdateSecret) error {
	if err := c.checkNewSecret(m); err != nil {
		return err
	}
	c.log.Info("session: user updated secret", "user", LogName(c.user), "reason", LogName(m.Reason))
	c.sendMethod(0, &amqp.ConnectionUpdateSecretOk{})
	return nil
}
