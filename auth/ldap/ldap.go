package ldap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	goldap "github.com/go-ldap/ldap/v3"

	"github.com/warrenmq/broker/auth"
)

// Name is the backend's name in a Chain and in log lines (RabbitMQ's
// auth_backends.N = ldap).
const Name = "ldap"

// Backend authenticates by binding to an LDAP directory as the user and
// authorises with queries against it, as rabbitmq_auth_backend_ldap does.
// It is an auth.Authenticator and an auth.Authorizer, safe for
// concurrent use; Close it when done.
type Backend struct {
	cfg   *compiled
	pool  *pool
	log   *slog.Logger
	level slog.Level

	// mu guards sessions: the DN and password of each user's latest
	// login, for other_bind = as_user (RabbitMQ keeps them with the
	// connection's user; an Identity carries no secret).
	mu       sync.Mutex
	sessions map[string]session
}

type session struct{ dn, pw string }

// maxSessions bounds the remembered logins; when full they are
// forgotten all at once and users' next decisions fail until they log in
// again, which beats growing without bound.
const maxSessions = 10000

// New checks c and returns a Backend for it. It does not connect: the
// first login does.
func New(c Config) (*Backend, error) {
	k, err := compile(c)
	if err != nil {
		return nil, err
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	level := slog.LevelDebug
	if c.Log {
		level = slog.LevelInfo
	}
	return &Backend{cfg: k, pool: newPool(k), log: log, level: level, sessions: map[string]session{}}, nil
}

// Close closes the pooled connections; calls after it fail.
func (b *Backend) Close() error {
	b.pool.close()
	return nil
}

// Backend is a Chain entry called name that answers with b for both
// authentication and authorisation; wrap b in an auth.Cache first to
// cache its answers.
func (b *Backend) Backend(name string) auth.Backend {
	return auth.Backend{Name: name, Authn: b, Authz: b}
}

// Dials reports how many connections b has opened, which shows the pool
// at work.
func (b *Backend) Dials() int64 { return b.pool.dials.Load() }

// with runs fn on a pooled connection within ctx and Config.Timeout.
// When the time runs out the connection is closed under fn, which then
// fails; the answer is a timeout error, never a refusal.
func (b *Backend) with(ctx context.Context, fn func(pc *pconn) error) error {
	if b.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.Timeout)
		defer cancel()
	}
	var err error
	for attempt := 0; ; attempt++ {
		var pc *pconn
		var reused bool
		if pc, reused, err = b.pool.get(ctx); err != nil {
			break
		}
		stop := context.AfterFunc(ctx, func() { _ = pc.c.Close() })
		err = fn(pc)
		aborted := !stop()
		broken := aborted || clientSide(err)
		b.pool.put(pc, !broken)
		// A pooled connection the server dropped while it sat idle
		// (restarted, or a firewall forgot it) fails on first use: once,
		// try again on a fresh one. fn only binds and reads, so running it
		// again is safe.
		if broken && !aborted && reused && attempt == 0 && ctx.Err() == nil {
			continue
		}
		break
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, auth.ErrRefused) && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("ldap: no answer in time: %w (%v)", ctx.Err(), err)
	}
	return err
}

// clientSide reports whether err came from the connection rather than
// the server's answer (go-ldap's codes from 200 up, or no LDAP result),
// after which the connection is not reused.
func clientSide(err error) bool {
	if err == nil || errors.Is(err, auth.ErrRefused) {
		return false
	}
	var le *goldap.Error
	if errors.As(err, &le) {
		return le.ResultCode >= goldap.ErrorNetwork
	}
	return !errors.Is(err, errQuery)
}

// mechanismDirect is the Request.Mechanism of a direct Channel the
// embedding program opens as a named user: the program vouches for the
// name and sends no secret, as RabbitMQ's direct connections ask their
// backends by user name alone.
const mechanismDirect = "DIRECT"

// Authenticate binds as the user with the password (RabbitMQ's
// check_user_login): an empty password is refused without asking the
// server, wrong credentials and unknown users are refused, a directory
// that cannot be reached or does not answer in time is an error (try
// again). The tags are those whose tag query holds for the user. An
// EXTERNAL login (a verified client certificate, no password) or a
// direct one (mechanismDirect) is accepted when the user's entry exists,
// looked up as other_bind, which must then be anon or a service account,
// as RabbitMQ's passwordless logins are.
func (b *Backend) Authenticate(ctx context.Context, req auth.Request) (auth.Identity, error) {
	if !validName(req.User) {
		return auth.Identity{}, auth.Refuse("user name is empty, longer than %d bytes or not UTF-8", maxName)
	}
	passwordless := req.Secret == "" && (req.Mechanism == "EXTERNAL" && req.Cert != nil || req.Mechanism == mechanismDirect)
	switch {
	case passwordless && b.cfg.OtherBind.asUser():
		return auth.Identity{}, auth.Refuse("user '%s' - passwordless login needs other_bind to be anon or a service account", req.User)
	case req.Secret == "" && !passwordless:
		return auth.Identity{}, auth.Refuse("user '%s' - unauthenticated bind not allowed", req.User)
	}
	var id auth.Identity
	var dn string
	err := b.with(ctx, func(pc *pconn) error {
		var err error
		if passwordless {
			dn, err = b.passwordlessDN(pc, req.User)
		} else {
			dn, err = b.loginDN(pc, req.User, req.Secret)
		}
		if err != nil {
			return err
		}
		if err := b.bindOther(pc, dn, req.Secret); err != nil {
			return err
		}
		v := userVars(req.User)
		v["user_dn"] = dn
		id = auth.Identity{User: req.User}
		for _, t := range b.cfg.tags {
			ok, err := t.q.eval(b.env(v, pc))
			if err != nil {
				return fmt.Errorf("ldap: tag query %s: %w", t.name, err)
			}
			if ok {
				id.Tags = append(id.Tags, t.name)
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, auth.ErrRefused) {
			b.forget(req.User)
		}
		b.log.Log(ctx, b.level, "ldap: login", "user", req.User, "error", err)
		return auth.Identity{}, err
	}
	// The password is kept only when other_bind = as_user needs it.
	pw := ""
	if b.cfg.OtherBind.asUser() {
		pw = req.Secret
	}
	b.remember(req.User, session{dn, pw})
	b.log.Log(ctx, b.level, "ldap: login", "user", req.User, "dn", dn, "tags", id.Tags)
	return id, nil
}

// passwordlessDN is the DN of a user whose client certificate the broker
// verified (SASL EXTERNAL; RabbitMQ's check_user_login without a
// password), found bound as other_bind: the filled user_dn_pattern, which
// must exist, or the DN lookup's entry.
func (b *Backend) passwordlessDN(pc *pconn, user string) (string, error) {
	if err := b.bindOther(pc, "", ""); err != nil {
		return "", err
	}
	if b.cfg.lookup {
		return b.lookupDN(pc, user, fill(b.cfg.UserDNPattern, userVars(user), sinkString))
	}
	dn := fill(b.cfg.UserDNPattern, userVars(user), sinkDN)
	ok, err := dirConn{pc}.exists(dn, "(objectClass=*)")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", auth.Refuse("user '%s' - no such user", user)
	}
	return dn, nil
}

// loginDN checks the password by a bind and returns the user's DN: the
// filled user_dn_pattern, or the DN found by dn_lookup_attribute, looked
// up before the bind (dn_lookup_bind anon or a service account) or after
// binding with the filled pattern (as_user). user_bind_pattern, when
// set, is the name bound with instead of the filled user_dn_pattern
// (RabbitMQ's simple_bind_fill_pattern; Active Directory's
// ${ad_user}@${ad_domain}).
func (b *Backend) loginDN(pc *pconn, user, pw string) (string, error) {
	v := userVars(user)
	pattern := fill(b.cfg.UserDNPattern, v, sinkDN)
	bindName := pattern
	if b.cfg.UserBindPattern != "" {
		bindName = fill(b.cfg.UserBindPattern, v, sinkDN)
	}
	if !b.cfg.lookup {
		return pattern, userBind(pc, user, bindName, pw)
	}
	if b.cfg.DNLookupBind.asUser() {
		if err := userBind(pc, user, bindName, pw); err != nil {
			return "", err
		}
		return b.lookupDN(pc, user, pattern)
	}
	lb := b.cfg.DNLookupBind
	if err := pc.bindAs(lb.Anon, lb.DN, lb.Password); err != nil {
		return "", fmt.Errorf("ldap: dn_lookup_bind: %w", err)
	}
	dn, err := b.lookupDN(pc, user, fill(b.cfg.UserDNPattern, v, sinkString))
	if err != nil {
		return "", err
	}
	return dn, userBind(pc, user, dn, pw)
}

// userVars are the variables of a user name: username, and when it is
// DOMAIN\user, ad_domain and ad_user (RabbitMQ's
// get_active_directory_args splits at the first backslash).
func userVars(user string) vars {
	v := vars{"username": user}
	if i := strings.IndexByte(user, '\\'); i > 0 && i < len(user)-1 {
		v["ad_domain"], v["ad_user"] = user[:i], user[i+1:]
	}
	return v
}

// userBind binds as the user: invalid credentials (49), and any other
// answer of the server's refusing the bind, is a refusal.
func userBind(pc *pconn, user, dn, pw string) error {
	err := pc.bindAs(false, dn, pw)
	if err == nil {
		return nil
	}
	var le *goldap.Error
	if errors.As(err, &le) && le.ResultCode < goldap.ErrorNetwork {
		if le.ResultCode == goldap.LDAPResultInvalidCredentials {
			return auth.Refuse("user '%s' - invalid credentials", user)
		}
		return auth.Refuse("user '%s' - bind refused: %s", user, goldap.LDAPResultCodeMap[le.ResultCode])
	}
	return err
}

// lookupDN searches dn_lookup_base for dn_lookup_attribute = value (the
// filled user_dn_pattern: as bound with when dn_lookup_bind is as_user,
// else the name as given), escaped for the filter. Exactly one entry is
// the user; none or several is a refusal.
func (b *Backend) lookupDN(pc *pconn, user, value string) (string, error) {
	filter := "(" + b.cfg.DNLookupAttribute + "=" + EscapeFilterValue(value) + ")"
	res, err := pc.c.Search(goldap.NewSearchRequest(b.cfg.DNLookupBase, goldap.ScopeWholeSubtree,
		goldap.NeverDerefAliases, 2, 0, false, filter, []string{"1.1"}, nil))
	switch {
	case goldap.IsErrorWithCode(err, goldap.LDAPResultSizeLimitExceeded):
		return "", auth.Refuse("user '%s' - several entries match", user)
	case goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject):
		return "", fmt.Errorf("ldap: dn_lookup_base %q does not exist", b.cfg.DNLookupBase)
	case err != nil:
		return "", fmt.Errorf("ldap: dn lookup: %w", err)
	case len(res.Entries) == 0:
		return "", auth.Refuse("user '%s' - no such user", user)
	case len(res.Entries) > 1:
		return "", auth.Refuse("user '%s' - several entries match", user)
	}
	return res.Entries[0].DN, nil
}

// bindOther binds pc as other_bind says, for queries about the user dn.
func (b *Backend) bindOther(pc *pconn, dn, pw string) error {
	ob := b.cfg.OtherBind
	var err error
	if ob.asUser() {
		err = pc.bindAs(false, dn, pw)
	} else {
		err = pc.bindAs(ob.Anon, ob.DN, ob.Password)
	}
	if err != nil {
		return fmt.Errorf("ldap: other_bind: %w", err)
	}
	return nil
}

// remember keeps s as user's latest login through b.
func (b *Backend) remember(user string, s session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.sessions[user]; !ok && len(b.sessions) >= maxSessions {
		clear(b.sessions)
	}
	b.sessions[user] = s
}

// forget drops user's session after a refused login: its password
// may have changed.
func (b *Backend) forget(user string) {
	b.mu.Lock()
	delete(b.sessions, user)
	b.mu.Unlock()
}

// session is user's latest login through b, if any.
func (b *Backend) session(user string) (session, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[user]
	return s, ok
}

// decide evaluates q for the user with v (username and user_dn are
// added), bound as other_bind.
func (b *Backend) decide(ctx context.Context, what string, id auth.Identity, q Query, v vars) (bool, error) {
	if !validName(id.User) {
		return false, nil
	}
	s, known := b.session(id.User)
	if b.cfg.OtherBind.asUser() && !known {
		return false, fmt.Errorf("ldap: other_bind is as_user but user '%s' has not logged in through this backend", id.User)
	}
	var ok bool
	err := b.with(ctx, func(pc *pconn) error {
		if known {
			if err := b.bindOther(pc, s.dn, s.pw); err != nil {
				return err
			}
		} else {
			if err := b.bindOther(pc, "", ""); err != nil {
				return err
			}
			s.dn = fill(b.cfg.UserDNPattern, userVars(id.User), sinkDN)
			if b.cfg.lookup {
				dn, err := b.lookupDN(pc, id.User, fill(b.cfg.UserDNPattern, userVars(id.User), sinkString))
				if errors.Is(err, auth.ErrRefused) {
					return nil // no such user: nothing is granted
				}
				if err != nil {
					return err
				}
				s.dn = dn
			}
		}
		for k, val := range userVars(id.User) {
			v[k] = val
		}
		v["user_dn"] = s.dn
		var err error
		ok, err = q.eval(b.env(v, pc))
		return err
	})
	if err != nil {
		b.log.Log(ctx, b.level, "ldap: "+what, "user", id.User, "error", err)
		return false, err
	}
	b.log.Log(ctx, b.level, "ldap: "+what, "user", id.User, "allowed", ok)
	return ok, nil
}

// VHostAccess evaluates vhost_access_query with ${vhost}.
func (b *Backend) VHostAccess(ctx context.Context, id auth.Identity, vhost string) (bool, error) {
	return b.decide(ctx, "vhost access", id, b.cfg.vhostQ, vars{"vhost": vhost})
}

// ResourceAccess evaluates resource_access_query with ${vhost},
// ${resource} (exchange or queue), ${name} and ${permission} (configure,
// write or read).
func (b *Backend) ResourceAccess(ctx context.Context, id auth.Identity, r auth.Resource, p auth.Permission) (bool, error) {
	return b.decide(ctx, "resource access", id, b.cfg.resourceQ, vars{
		"vhost": r.VHost, "resource": r.Kind, "name": r.Name, "permission": p.String(),
	})
}

// TopicAccess evaluates topic_access_query with ${vhost}, ${resource}
// (topic), ${name} (the exchange), ${permission} and ${routing_key}.
func (b *Backend) TopicAccess(ctx context.Context, id auth.Identity, r auth.Resource, p auth.Permission, routingKey string) (bool, error) {
	return b.decide(ctx, "topic access", id, b.cfg.topicQ, vars{
		"vhost": r.VHost, "resource": "topic", "name": r.Name, "permission": p.String(), "routing_key": routingKey,
	})
}

// env is an evaluation of a query with v over pc.
func (b *Backend) env(v vars, pc *pconn) *env {
	base := b.cfg.GroupLookupBase
	if base == "" {
		base = b.cfg.DNLookupBase
	}
	return &env{v: v, dir: dirConn{pc}, groupBase: base}
}

// dirConn is a directory over a bound connection.
type dirConn struct{ pc *pconn }

// exists reports whether dn exists and matches filter (a base-object
// search). A DN that does not exist, or is not a DN at all once filled,
// is false.
func (d dirConn) exists(dn, filter string) (bool, error) {
	res, err := d.pc.c.Search(goldap.NewSearchRequest(dn, goldap.ScopeBaseObject,
		goldap.NeverDerefAliases, 1, 0, false, filter, []string{"1.1"}, nil))
	switch {
	case goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject),
		goldap.IsErrorWithCode(err, goldap.LDAPResultInvalidDNSyntax):
		return false, nil
	case err != nil:
		return false, err
	}
	return len(res.Entries) > 0, nil
}

// search returns the DNs of the entries under base matching filter. A
// base that does not exist holds none.
func (d dirConn) search(base string, oneLevel bool, filter string) ([]string, error) {
	scope := goldap.ScopeWholeSubtree
	if oneLevel {
		scope = goldap.ScopeSingleLevel
	}
	res, err := d.pc.c.Search(goldap.NewSearchRequest(base, scope,
		goldap.NeverDerefAliases, maxNestedGroups, 0, false, filter, []string{"1.1"}, nil))
	switch {
	case goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject):
		return nil, nil
	case err != nil:
		return nil, err
	}
	dns := make([]string, len(res.Entries))
	for i, e := range res.Entries {
		dns[i] = e.DN
	}
	return dns, nil
}

// attribute returns the values of attr of entry dn; none when the entry
// or the attribute is absent.
func (d dirConn) attribute(dn, attr string) ([]string, error) {
	res, err := d.pc.c.Search(goldap.NewSearchRequest(dn, goldap.ScopeBaseObject,
		goldap.NeverDerefAliases, 1, 0, false, "(objectClass=*)", []string{attr}, nil))
	switch {
	case goldap.IsErrorWithCode(err, goldap.LDAPResultNoSuchObject),
		goldap.IsErrorWithCode(err, goldap.LDAPResultInvalidDNSyntax):
		return nil, nil
	case err != nil:
		return nil, err
	case len(res.Entries) != 1:
		return nil, nil
	}
	return res.Entries[0].GetEqualFoldAttributeValues(attr), nil
}
