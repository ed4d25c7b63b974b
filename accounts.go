package broker

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net"
	"regexp"
	"slices"
	"sync"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/meta"
)

// Accounts: users, their password hashes and tags, and per-vhost
// permissions live in the meta store (meta.Accounts), so with DataDir they
// survive restarts. Options.Users only seeds the store: at New, each listed
// user that is not stored yet is added (with full permissions on every
// configured vhost); a user already stored keeps its stored password, tags
// and permissions, so changes made through AddUser, SetPermissions and
// friends win over Options. A seeded user deleted with DeleteUser comes back
// at the next New while Options still lists it.
//
// Connections look permissions up once, at connection.open, and keep a
// shared *session.Access per (user, vhost) that SetPermissions,
// ClearPermissions and DeleteUser update in place: open connections see a
// change at their next check.

// Stored password hashes (meta.User.PasswordHash) are RabbitMQ's
// password_hash: base64(salt ++ H(salt ++ password)) with a 4-byte salt.
// H is SHA-256 (rabbit_password_hashing_sha256, what Warren itself writes)
// unless the hash starts with an algorithm marker: "sha512:" for
// rabbit_password_hashing_sha512, "md5:" for the legacy
// rabbit_password_hashing_md5 (both only come from imported definitions).
// ':' is not a base64 character, so an unmarked hash is always SHA-256:
// hashes stored before the markers existed read as they always did, and
// SHA-256 hashes stay readable by those older versions. An empty hash is a
// user without a password (RabbitMQ's password_hash ""): no password
// matches it; EXTERNAL logins still work.

// passwordSaltLen is the salt length of RabbitMQ's password hashes.
const passwordSaltLen = 4

// passwordHashing is one of RabbitMQ's hashing algorithms.
type passwordHashing struct {
	name   string // RabbitMQ's module name, as definitions carry it
	marker string // the stored hash's prefix; "" for SHA-256
	new    func() hash.Hash
}

var passwordHashings = []passwordHashing{
	{definitions.HashingSHA256, "", sha256.New},
	{definitions.HashingSHA512, "sha512:", sha512.New},
	{definitions.HashingMD5, "md5:", md5.New},
}

// hashingNamed finds an algorithm by RabbitMQ's name; "" is SHA-256,
// RabbitMQ's default since 3.6 and what files without the key mean.
func hashingNamed(name string) (passwordHashing, bool) {
	if name == "" {
		name = definitions.HashingSHA256
	}
	for _, h := range passwordHashings {
		if h.name == name {
			return h, true
		}
	}
	return passwordHashing{}, false
}

// splitStoredHash returns a stored hash's algorithm and its base64 part.
func splitStoredHash(stored []byte) (passwordHashing, []byte) {
	for _, h := range passwordHashings[1:] {
		if rest, ok := bytes.CutPrefix(stored, []byte(h.marker)); ok {
			return h, rest
		}
	}
	return passwordHashings[0], stored
}

// storedHash validates RabbitMQ's password_hash made with the algorithm
// named alg and returns the form to store ("" stays "": no password).
func storedHash(alg, passwordHash string) ([]byte, error) {
	h, ok := hashingNamed(alg)
	if !ok {
		return nil, fmt.Errorf("unknown hashing_algorithm %q", alg)
	}
	if passwordHash == "" {
		return []byte{}, nil
	}
	raw, err := base64.StdEncoding.DecodeString(passwordHash)
	if err != nil || len(raw) != passwordSaltLen+h.new().Size() {
		return nil, fmt.Errorf("password_hash is not base64 of a %d-byte salt and a %s digest", passwordSaltLen, h.name)
	}
	return []byte(h.marker + passwordHash), nil
}

// hashPassword returns RabbitMQ's rabbit_password_hashing_sha256 form of
// password: base64(salt ++ SHA-256(salt ++ password)) with a random 4-byte
// salt, the password_hash RabbitMQ's definitions carry.
func hashPassword(password string) []byte {
	var salt [passwordSaltLen]byte
	_, _ = rand.Read(salt[:]) // crypto/rand.Read never fails (Go 1.24+)
	return encodeHash(sha256.New(), salt[:], password)
}

func encodeHash(h hash.Hash, salt []byte, password string) []byte {
	h.Write(salt)
	h.Write([]byte(password))
	raw := h.Sum(slices.Clip(salt))
	out := make([]byte, base64.StdEncoding.EncodedLen(len(raw)))
	base64.StdEncoding.Encode(out, raw)
	return out
}

// checkPassword reports whether password matches a stored hash (any of
// the algorithms above), in constant time for a given hash. A blank
// password never matches: RabbitMQ's internal backend refuses blank
// passwords (rabbit_auth_backend_internal:user_login_authentication),
// whatever was hashed.
func checkPassword(stored []byte, password string) bool {
	if password == "" {
		return false
	}
	h, b64 := splitStoredHash(stored)
	hh := h.new()
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Decode(raw, b64)
	if err != nil || n != passwordSaltLen+hh.Size() {
		return false
	}
	want := encodeHash(hh, slices.Clone(raw[:passwordSaltLen]), password)
	return subtle.ConstantTimeCompare(want, b64) == 1
}

// compileGrant compiles a permission's regexps the way RabbitMQ uses them
// (rabbit_auth_backend_internal:check_resource_access): unanchored, so a
// name matches when the expression matches any part of it ("orders"
// matches "my-orders"; anchor with ^ and $ to mean the whole name), and ""
// stands for "^$", matching nothing but the empty name. Go's RE2 syntax
// is PCRE's minus backreferences and lookaround, which are refused here.
func compileGrant(p meta.Permission) (*session.Grant, error) {
	var g session.Grant
	for _, f := range []struct {
		what string
		expr string
		dst  **regexp.Regexp
	}{{"configure", p.Configure, &g.Configure}, {"write", p.Write, &g.Write}, {"read", p.Read, &g.Read}} {
		expr := f.expr
		if expr == "" {
			expr = "^$"
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("broker: %s permission %q: %w", f.what, f.expr, err)
		}
		*f.dst = re
	}
	return &g, nil
}

// accountState is the broker's in-memory side of accounts: the shared
// Access of every (user, vhost) a connection opened, and connection counts
// for the limits (limits.go).
type accountState struct {
	throttle *loginThrottle // failed logins per source (loginguard.go)
	mu       struct {
		sync.Mutex
		access  map[accessKey]*session.Access
		conns   int
		byVHost map[string]int
	}
}

type accessKey struct{ user, vhost string }

// seedUsers stores every Options.Users entry not stored yet.
func (b *Broker) seedUsers(ctx context.Context) error {
	for _, u := range b.opts.Users {
		_, err := b.stores.meta.GetUser(ctx, u.Name)
		if err == nil {
			continue
		}
		if !errors.Is(err, meta.ErrNotFound) {
			return fmt.Errorf("broker: seeding user %q: %w", u.Name, err)
		}
		if err := b.stores.meta.PutUser(ctx, meta.User{Name: u.Name, PasswordHash: hashPassword(u.Password), Tags: slices.Clone(u.Tags)}); err != nil {
			return fmt.Errorf("broker: seeding user %q: %w", u.Name, err)
		}
		for _, v := range b.opts.VHosts {
			p := fullPermission.metaPermission(u.Name, canonicalVHost(v))
			if err := b.stores.meta.PutPermission(ctx, p); err != nil {
				return fmt.Errorf("broker: seeding permissions of %q: %w", u.Name, err)
			}
		}
	}
	return nil
}

// login is session.Config.Login: the source's throttle delay, then the
// password (or certificate) check, then RabbitMQ's loopback_users rule for
// guest (loginguard.go explains the delay and the error).
func (b *Broker) login(at *session.LoginAttempt) (bool, string, error) {
	src := throttleKey(at.Peer)
	if !b.throttleWait(context.Background(), b.acct.throttle.admit(src)) {
		return false, "", amqp.NewError(amqp.ConnectionForced, amqp.ClassConnection, amqp.MethodConnectionStartOk, "broker shutdown")
	}
	ok, reason, err := b.checkLogin(at)
	if !ok && err == nil {
		b.acct.throttle.failed(src)
	}
	return ok, reason, err
}

func (b *Broker) checkLogin(at *session.LoginAttempt) (bool, string, error) {
	u, err := b.lookupUser(context.Background(), at.User)
	if unavailable(err) {
		b.log.Warn("broker: cannot read user", "user", session.LogName(at.User), "err", err)
		return false, "", errLoginUnavailable(err, amqp.ClassConnection, amqp.MethodConnectionStartOk)
	}
	if err != nil {
		if at.Mechanism == "EXTERNAL" {
			return false, fmt.Sprintf("user '%s' - no such user", at.User), nil
		}
		return false, "", nil
	}
	if at.Mechanism != "EXTERNAL" && !checkPassword(u.PasswordHash, at.Password) {
		return false, "", nil
	}
	if at.User == "guest" && !b.opts.AllowRemoteGuest && !isLoopback(at.Peer) {
		return false, fmt.Sprintf("user '%s' can only connect via localhost", at.User), nil
	}
	return true, "", nil
}

// isLoopback reports whether a peer address is local: a loopback IP, a unix
// socket, or no address at all (in-process connections from Dial).
func isLoopback(a net.Addr) bool {
	switch a := a.(type) {
	case nil:
		return true
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	if a.Network() == "pipe" {
		return true
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// openAccess is session.Config.Open: connection limits, then the user's
// permissions on the vhost (RabbitMQ's order in handle_method0 for
// connection.open).
func (b *Broker) openAccess(user, vhostName string) (*session.Access, func(), error) {
	vh := canonicalVHost(vhostName)
	release, err := b.admitConnection(user, vh)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.LoginTimeout)
	p, err := b.stores.meta.GetPermission(ctx, user, vh)
	cancel()
	if err != nil {
		release()
		if unavailable(err) {
			return nil, nil, errLoginUnavailable(err, amqp.ClassConnection, amqp.MethodConnectionOpen)
		}
		return nil, nil, amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "access to vhost '%s' refused for user '%s'", vh, user)
	}
	g, err := compileGrant(p)
	if err != nil {
		release()
		return nil, nil, amqp.NewError(amqp.InternalError, amqp.ClassConnection, amqp.MethodConnectionOpen, "%v", err)
	}
	return b.sharedAccess(user, vh, g), release, nil
}

// sharedAccess returns the Access of (user, vhost), created with g if new
// and otherwise updated to g (the store has the last word).
func (b *Broker) sharedAccess(user, vh string, g *session.Grant) *session.Access {
	b.acct.mu.Lock()
	defer b.acct.mu.Unlock()
	k := accessKey{user, vh}
	a := b.acct.mu.access[k]
	if a == nil {
		if b.acct.mu.access == nil {
			b.acct.mu.access = make(map[accessKey]*session.Access)
		}
		a = session.NewAccess(user, vh, g)
		b.acct.mu.access[k] = a
		return a
	}
	a.Set(g)
	return a
}

// updateAccess sets the grant of open connections of user on vh (every
// vhost when vh is ""), if any.
func (b *Broker) updateAccess(user, vh string, g *session.Grant) {
	b.acct.mu.Lock()
	defer b.acct.mu.Unlock()
	for k, a := range b.acct.mu.access {
		if k.user == user && (vh == "" || k.vhost == vh) {
			a.Set(g)
		}
	}
}

// AddUser stores a user with a salted SHA-256 hash of password and tags
// (RabbitMQ's "administrator", "monitoring", ...), replacing an existing
// user of that name (as rabbitmqctl add_user would refuse and
// change_password would do; here one call does both). It grants nothing:
// call SetPermissions.
func (b *Broker) AddUser(ctx context.Context, name, password string, tags ...string) error {
	if name == "" || len(name) > 255 {
		return fmt.Errorf("broker: user name must be 1 to 255 bytes, got %d", len(name))
	}
	return b.stores.meta.PutUser(ctx, meta.User{Name: name, PasswordHash: hashPassword(password), Tags: slices.Clone(tags)})
}

// DeleteUser deletes a user and all its permissions, then closes the
// user's open connections (direct Channels included) with 320
// CONNECTION_FORCED "user 'name' is deleted", as RabbitMQ's connection
// tracking does on its user_deleted event. A connection racing the delete
// is still refused every permission check (403) until it is closed.
func (b *Broker) DeleteUser(ctx context.Context, name string) error {
	if _, err := b.stores.meta.GetUser(ctx, name); err != nil {
		return fmt.Errorf("broker: delete user %q: %w", name, err)
	}
	perms, err := b.stores.meta.ListPermissions(ctx)
	if err != nil {
		return fmt.Errorf("broker: delete user %q: %w", name, err)
	}
	for _, p := range perms {
		if p.User == name {
			if err := b.stores.meta.DeletePermission(ctx, name, p.VHost); err != nil {
				return fmt.Errorf("broker: delete user %q: %w", name, err)
			}
		}
	}
	if err := b.stores.meta.DeleteUser(ctx, name); err != nil {
		return fmt.Errorf("broker: delete user %q: %w", name, err)
	}
	b.updateAccess(name, "", nil)
	b.closeConnectionsOf(func(in session.ConnInfo) bool { return in.User == name },
		fmt.Sprintf("user '%s' is deleted", name))
	return nil
}

// closeConnectionsOf closes every open connection that match selects with
// 320 CONNECTION_FORCED and text (RabbitMQ's close_connections: network
// connections through rabbit_reader:shutdown, direct ones through
// amqp_direct_connection:server_close, both 320).
func (b *Broker) closeConnectionsOf(match func(session.ConnInfo) bool, text string) {
	b.mu.Lock()
	conns := make([]*session.Conn, 0, len(b.mu.conns))
	for c := range b.mu.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		if match(c.Info()) {
			c.Shutdown(amqp.ConnectionForced, text)
		}
	}
}

// Permission is one user's permissions on one virtual host: RabbitMQ's
// configure, write and read regular expressions. Each is matched
// unanchored against an exchange or queue name, as RabbitMQ does, so ".*"
// allows every name, "" none and "^q\." every name starting "q."; anchor
// with ^ and $ to mean a whole name. Go's RE2 syntax applies (PCRE's minus
// backreferences and lookaround). SetPermissions takes it and Permissions
// returns it.
type Permission struct {
	// Configure: declare and delete exchanges and queues (RabbitMQ's
	// configure).
	Configure string
	// Write: publish to an exchange, bind a queue or exchange as the
	// destination.
	Write string
	// Read: consume, get and purge from a queue; be the source of a
	// binding.
	Read string
}

// fullPermission grants everything: what Options.Users get on every
// configured vhost.
var fullPermission = Permission{Configure: ".*", Write: ".*", Read: ".*"}

// metaPermission is p as the meta store keeps it, for user on vhost.
func (p Permission) metaPermission(user, vhost string) meta.Permission {
	return meta.Permission{User: user, VHost: vhost, Configure: p.Configure, Write: p.Write, Read: p.Read}
}

// permissionOf is a stored permission without its user and vhost.
func permissionOf(p meta.Permission) Permission {
	return Permission{Configure: p.Configure, Write: p.Write, Read: p.Read}
}

// SetPermissions grants user perm on vhost (RabbitMQ's set_permissions),
// replacing what the user had there. The user and the vhost must exist
// (else an error wrapping meta.ErrNotFound), and each expression must
// compile. Open connections of the user on the vhost, direct Channels
// included, use the new permissions from their next check.
func (b *Broker) SetPermissions(ctx context.Context, user, vhostName string, perm Permission) error {
	vh := canonicalVHost(vhostName)
	p := perm.metaPermission(user, vh)
	g, err := compileGrant(p)
	if err != nil {
		return err
	}
	if _, err := b.stores.meta.GetUser(ctx, user); err != nil {
		return fmt.Errorf("broker: set permissions of %q: %w", user, err)
	}
	if _, ok := b.lookupVHost(vh); !ok {
		return fmt.Errorf("broker: set permissions of %q: vhost %q: %w", user, vh, meta.ErrNotFound)
	}
	if err := b.stores.meta.PutPermission(ctx, p); err != nil {
		return fmt.Errorf("broker: set permissions of %q: %w", user, err)
	}
	b.updateAccess(user, vh, g)
	return nil
}

// ClearPermissions removes user's permissions on vhost: new connections of
// the user to it are refused (530) and open ones get 403 on every check.
func (b *Broker) ClearPermissions(ctx context.Context, user, vhostName string) error {
	vh := canonicalVHost(vhostName)
	if err := b.stores.meta.DeletePermission(ctx, user, vh); err != nil {
		return fmt.Errorf("broker: clear permissions of %q: %w", user, err)
	}
	b.updateAccess(user, vh, nil)
	return nil
}

// Permissions returns user's permissions on vhost, as SetPermissions
// stored them; an error wrapping meta.ErrNotFound when there are none.
func (b *Broker) Permissions(ctx context.Context, user, vhostName string) (Permission, error) {
	p, err := b.stores.meta.GetPermission(ctx, user, canonicalVHost(vhostName))
	if err != nil {
		return Permission{}, fmt.Errorf("broker: permissions of %q: %w", user, err)
	}
	return permissionOf(p), nil
}

// AddVHost creates and opens a virtual host (stored, so it is reopened at
// the next New). It grants nobody anything: call SetPermissions.
func (b *Broker) AddVHost(ctx context.Context, name string) error {
	name = canonicalVHost(name)
	if len(name) > 255 {
		return fmt.Errorf("broker: vhost name longer than 255 bytes")
	}
	b.vhostsMu.Lock()
	defer b.vhostsMu.Unlock()
	if _, ok := b.vhosts[name]; ok {
		return fmt.Errorf("broker: vhost %q already exists", name)
	}
	return b.openVHostLocked(ctx, name, true)
}

// DeleteVHost deletes a virtual host with everything in it: its open
// connections are closed with 320 CONNECTION_FORCED, its queues (and their
// messages), exchanges and bindings are deleted, and so are all
// permissions on it. A vhost listed in Options.VHosts comes back, empty,
// at the next New.
func (b *Broker) DeleteVHost(ctx context.Context, name string) error {
	name = canonicalVHost(name)
	b.vhostsMu.Lock()
	vh, ok := b.vhosts[name]
	delete(b.vhosts, name)
	if ok {
		// Until the store has forgotten it, shared mode must not take the
		// vhost for one another broker created.
		if b.deleting == nil {
			b.deleting = make(map[string]bool)
		}
		b.deleting[name] = true
	}
	b.vhostsMu.Unlock()
	if !ok {
		return fmt.Errorf("broker: delete vhost %q: %w", name, meta.ErrNotFound)
	}
	defer func() {
		b.vhostsMu.Lock()
		delete(b.deleting, name)
		b.vhostsMu.Unlock()
	}()
	b.closeConnectionsOf(func(in session.ConnInfo) bool { return canonicalVHost(in.VHost) == name },
		fmt.Sprintf("vhost '%s' is deleted", name))

	var errs []error
	for _, q := range vh.Queues() {
		// As the owner, so exclusive queues go too.
		if _, err := vh.DeleteQueue(ctx, q.Def.Owner, q.Def.Name, false, false); err != nil {
			errs = append(errs, err)
		}
	}
	vh.Close()
	// What the vhost did not delete itself (exchanges, bindings, queues it
	// could not), straight from the store.
	st := b.stores.meta
	if bs, err := st.ListBindings(ctx, name); err == nil {
		for _, bd := range bs {
			errs = append(errs, st.DeleteBinding(ctx, bd))
		}
	} else {
		errs = append(errs, err)
	}
	if xs, err := st.ListExchanges(ctx, name); err == nil {
		for _, x := range xs {
			errs = append(errs, st.DeleteExchange(ctx, name, x.Name))
		}
	} else {
		errs = append(errs, err)
	}
	if qs, err := st.ListQueues(ctx, name); err == nil {
		for _, q := range qs {
			errs = append(errs, st.DeleteQueue(ctx, name, q.Name))
		}
	} else {
		errs = append(errs, err)
	}
	if ps, err := st.ListPermissions(ctx); err == nil {
		for _, p := range ps {
			if p.VHost == name {
				errs = append(errs, st.DeletePermission(ctx, p.User, name))
			}
		}
	} else {
		errs = append(errs, err)
	}
	errs = append(errs, st.DeleteVHost(ctx, name))
	b.acct.mu.Lock()
	for k, a := range b.acct.mu.access {
		if k.vhost == name {
			a.Set(nil)
		}
	}
	b.acct.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("broker: delete vhost %q: %w", name, err)
	}
	return nil
}
