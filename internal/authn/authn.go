package authn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/passwd"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/meta"
)

// Logins is the broker's login side. Make it with New.
type Logins struct {
	guard            *login.Guard
	chain            auth.Chain // nil: the user database alone
	allowRemoteGuest bool
	timeout          time.Duration
	log              *slog.Logger
}

// New returns the logins of a broker: g throttles and reads users,
// configured is Options.Auth (empty: the user database alone), guest may
// log in from elsewhere than loopback when allowRemoteGuest is set, and
// timeout bounds each login.
func New(g *login.Guard, configured auth.Chain, allowRemoteGuest bool, timeout time.Duration, log *slog.Logger) *Logins {
	l := &Logins{guard: g, allowRemoteGuest: allowRemoteGuest, timeout: timeout, log: log}
	if len(configured) > 0 {
		// auth.Internal filled in: its authentication the user database,
		// its authorisation auth.InternalAuthz.
		l.chain = make(auth.Chain, len(configured))
		for i, e := range configured {
			if e.Name == auth.InternalName && e.Authn == nil {
				e.Authn = internalAuthn{l}
			}
			if e.Name == auth.InternalName && e.Authz == nil {
				e.Authz = auth.InternalAuthz
			}
			l.chain[i] = e
		}
	}
	return l
}

// Chained reports whether a configured chain decides (Options.Auth).
func (l *Logins) Chained() bool { return l.chain != nil }

// Unavailable is what a login answers when the user store (or every
// backend) did not answer within the timeout: 320 CONNECTION_FORCED, "the
// client may retry", never 403 (internal/login explains why).
func Unavailable(err error, cls, mth uint16) *amqp.Error {
	return amqp.NewError(amqp.ConnectionForced, cls, mth,
		"cannot authenticate now: the user store did not answer (%v); try again, or another cluster member", err)
}

// internalAuthn is the user database as an auth.Authenticator
// (auth.Internal in the chain): the password checked against the stored
// hash, EXTERNAL by the user's existence, and RabbitMQ's loopback_users
// rule for guest.
type internalAuthn struct{ l *Logins }

func (a internalAuthn) Authenticate(ctx context.Context, req auth.Request) (auth.Identity, error) {
	u, err := a.l.guard.Lookup(ctx, req.User)
	if login.Unavailable(err) {
		return auth.Identity{}, err
	}
	if err != nil {
		return auth.Identity{}, auth.Refuse("user '%s' - no such user", req.User)
	}
	// EXTERNAL (a verified certificate) and DIRECT (a Channel the
	// embedding program opens AsUser) prove the identity without a
	// password: the user must exist.
	if req.Mechanism != "EXTERNAL" && req.Mechanism != auth.MechanismDirect && !passwd.CheckExported(u.HashingAlgorithm, u.PasswordHash, req.Secret) {
		return auth.Identity{}, auth.Refuse("invalid credentials")
	}
	if req.User == "guest" && !a.l.allowRemoteGuest && !isLoopback(req.Peer) {
		return auth.Identity{}, auth.Refuse("user '%s' can only connect via localhost", req.User)
	}
	return auth.Identity{User: u.Name, Tags: u.Tags}, nil
}

// AMQP is session.Config.Login: the source's throttle delay, then the
// password (or certificate) check, then RabbitMQ's loopback_users rule for
// guest. A refusal counts against the source; an unavailable store does
// not.
func (l *Logins) AMQP(at *session.LoginAttempt) (bool, string, error) {
	src := login.SourceKey(at.Peer)
	if !l.guard.Wait(context.Background(), src) {
		return false, "", amqp.NewError(amqp.ConnectionForced, amqp.ClassConnection, amqp.MethodConnectionStartOk, "broker shutdown")
	}
	if l.chain != nil {
		return l.chainAMQP(src, at)
	}
	ok, reason, err := l.check(at)
	if !ok && err == nil {
		l.guard.Throttle.Failed(src)
	}
	return ok, reason, err
}

// check is AMQP's check once the throttle let it through: whether at's
// credentials are good, the reason given to the client when they are
// not, or the error that closes the connection instead.
func (l *Logins) check(at *session.LoginAttempt) (bool, string, error) {
	u, err := l.guard.Lookup(context.Background(), at.User)
	if login.Unavailable(err) {
		l.log.Warn("broker: cannot read user", "user", session.LogName(at.User), "err", err)
		return false, "", Unavailable(err, amqp.ClassConnection, amqp.MethodConnectionStartOk)
	}
	if err != nil {
		if at.Mechanism == "EXTERNAL" {
			return false, fmt.Sprintf("user '%s' - no such user", at.User), nil
		}
		return false, "", nil
	}
	if at.Mechanism != "EXTERNAL" && !passwd.CheckExported(u.HashingAlgorithm, u.PasswordHash, at.Password) {
		return false, "", nil
	}
	if at.User == "guest" && !l.allowRemoteGuest && !isLoopback(at.Peer) {
		return false, fmt.Sprintf("user '%s' can only connect via localhost", at.User), nil
	}
	return true, "", nil
}

// Password is the HTTP basic-auth login of the management API and the
// authenticated metrics handler, with the log line an unavailable store
// deserves. It also returns how the user's permissions are decided: nil
// for the user database, else the Authorizer of the chain entry that let
// the user in. Errors wrap login.ErrRefused, login.ErrUnavailable or
// login.ErrClosed.
func (l *Logins) Password(ctx context.Context, peer net.Addr, name, password string) (meta.User, *session.Authz, error) {
	if l.chain != nil {
		return l.chainPassword(ctx, peer, name, password)
	}
	u, err := l.guard.Password(ctx, peer, name, password)
	if errors.Is(err, login.ErrUnavailable) {
		l.log.Warn("broker: cannot read user", "user", session.LogName(name), "err", err)
	}
	if err != nil {
		return meta.User{}, nil, err
	}
	return meta.User{Name: u.Name, Tags: u.Tags}, nil, nil
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
