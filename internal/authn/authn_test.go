package authn

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/passwd"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/meta"
)

// users is a login.Users holding the named users with password "pw", or
// failing every read with err.
type users struct {
	names []string
	err   error
}

func (s users) GetUser(_ context.Context, name string) (meta.User, error) {
	if s.err != nil {
		return meta.User{}, s.err
	}
	for _, n := range s.names {
		if n == name {
			alg, hash := passwd.Export(passwd.Hash("pw"))
			return meta.User{Name: n, PasswordHash: hash, HashingAlgorithm: alg, Tags: meta.UserTags{"monitoring"}}, nil
		}
	}
	return meta.User{}, meta.ErrNotFound
}

// authnFunc is an auth.Authenticator that records that it was asked.
type authnFunc struct {
	f     func(auth.Request) (auth.Identity, error)
	asked *[]string
	name  string
}

func (a authnFunc) Authenticate(_ context.Context, req auth.Request) (auth.Identity, error) {
	*a.asked = append(*a.asked, a.name)
	return a.f(req)
}

// authzVHosts allows the vhosts it lists, and every resource.
type authzVHosts map[string]bool

func (z authzVHosts) VHostAccess(_ context.Context, _ auth.Identity, vh string) (bool, error) {
	return z[vh], nil
}
func (authzVHosts) ResourceAccess(context.Context, auth.Identity, auth.Resource, auth.Permission) (bool, error) {
	return true, nil
}
func (authzVHosts) TopicAccess(context.Context, auth.Identity, auth.Resource, auth.Permission, string) (bool, error) {
	return true, nil
}

var (
	remote   = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}
	loopback = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
)

// newLogins is a Logins over us whose throttle has already forgiven
// login.FreeFailures failures of remote and of loopback, so the next
// refusal counted shows in Admit.
func newLogins(us login.Users, chain auth.Chain, remoteGuest bool) *Logins {
	g := &login.Guard{Throttle: login.NewThrottle(clock.NewFake(time.Unix(1_000_000, 0))), Users: us, Timeout: time.Second}
	for range login.FreeFailures {
		g.Throttle.Failed(login.SourceKey(remote))
		g.Throttle.Failed(login.SourceKey(loopback))
	}
	return New(g, chain, remoteGuest, time.Second, slog.New(slog.DiscardHandler))
}

// requireCode checks that err is an *amqp.Error of code, or nil for 0.
func requireCode(t *testing.T, code uint16, err error) {
	t.Helper()
	if code == 0 {
		require.NoError(t, err)
		return
	}
	var ae *amqp.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, code, ae.Code, ae.Error())
}

func counted(l *Logins, peer net.Addr) bool {
	return l.guard.Throttle.Admit(login.SourceKey(peer)) > 0
}

// TestAMQPUserDatabase: without a chain the user database decides: the
// stored password, EXTERNAL by the user's existence (with RabbitMQ's
// "no such user" reason), guest only from loopback unless allowed; a
// refusal counts against the source, a store that does not answer is
// 320 and does not.
func TestAMQPUserDatabase(t *testing.T) {
	stored := users{names: []string{"u", "guest"}}
	for _, tc := range []struct {
		name        string
		us          users
		remoteGuest bool
		at          session.LoginAttempt
		ok          bool
		reason      string
		code        uint16 // of the error; 0: none
		counted     bool
	}{
		{"right password", stored, false, session.LoginAttempt{Mechanism: "PLAIN", User: "u", Password: "pw", Peer: remote}, true, "", 0, false},
		{"wrong password", stored, false, session.LoginAttempt{Mechanism: "PLAIN", User: "u", Password: "x", Peer: remote}, false, "", 0, true},
		{"no such user", stored, false, session.LoginAttempt{Mechanism: "AMQPLAIN", User: "v", Password: "pw", Peer: remote}, false, "", 0, true},
		{"EXTERNAL, user exists", stored, false, session.LoginAttempt{Mechanism: "EXTERNAL", User: "u", Peer: remote}, true, "", 0, false},
		{"EXTERNAL, no such user", stored, false, session.LoginAttempt{Mechanism: "EXTERNAL", User: "v", Peer: remote}, false, "user 'v' - no such user", 0, true},
		{"guest from elsewhere", stored, false, session.LoginAttempt{Mechanism: "PLAIN", User: "guest", Password: "pw", Peer: remote}, false, "user 'guest' can only connect via localhost", 0, true},
		{"guest from loopback", stored, false, session.LoginAttempt{Mechanism: "PLAIN", User: "guest", Password: "pw", Peer: loopback}, true, "", 0, false},
		{"guest from elsewhere, allowed", stored, true, session.LoginAttempt{Mechanism: "PLAIN", User: "guest", Password: "pw", Peer: remote}, true, "", 0, false},
		{"store does not answer", users{err: errors.New("no leader")}, false, session.LoginAttempt{Mechanism: "PLAIN", User: "u", Password: "pw", Peer: remote}, false, "", amqp.ConnectionForced, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogins(tc.us, nil, tc.remoteGuest)
			require.False(t, l.Chained())
			at := tc.at
			ok, reason, err := l.AMQP(&at)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.reason, reason)
			requireCode(t, tc.code, err)
			require.Equal(t, tc.counted, counted(l, tc.at.Peer), "the failure counted against the source")
			require.Nil(t, at.Authz, "the stored grants decide")
		})
	}
}

// TestChainOrder: the chain's entries are asked in order and the first
// that accepts wins; one that fails (down) is passed over, not a refusal;
// auth.Internal stands for the user database; the entry that let the
// user in decides its permissions (nil Authz: the stored grants, for
// auth.Internal); every entry refusing is a refusal counted against the
// source, every entry failing a 320 that is not counted.
func TestChainOrder(t *testing.T) {
	refuse := func(auth.Request) (auth.Identity, error) { return auth.Identity{}, auth.Refuse("not mine") }
	fail := func(auth.Request) (auth.Identity, error) { return auth.Identity{}, errors.New("backend down") }
	accept := func(req auth.Request) (auth.Identity, error) {
		return auth.Identity{User: "from-" + req.User}, nil
	}
	z := authzVHosts{"/": true}
	for _, tc := range []struct {
		name    string
		entries []string // "refuse", "fail", "accept", "internal"
		user    string
		asked   []string
		ok      bool
		code    uint16
		backend string // of at.Authz; "": the stored grants decide
		as      string // the connection's user
		counted bool
	}{
		{"first accepts", []string{"accept", "refuse"}, "u", []string{"accept0"}, true, 0, "accept0", "from-u", false},
		{"refusal moves on", []string{"refuse", "accept"}, "u", []string{"refuse0", "accept1"}, true, 0, "accept1", "from-u", false},
		{"failure moves on", []string{"fail", "accept"}, "u", []string{"fail0", "accept1"}, true, 0, "accept1", "from-u", false},
		{"internal decides by stored grants", []string{"refuse", "internal", "accept"}, "u", []string{"refuse0"}, true, 0, "", "u", false},
		{"internal refuses, next accepts", []string{"internal", "accept"}, "nobody", []string{"accept1"}, true, 0, "accept1", "from-nobody", false},
		{"every entry refuses", []string{"refuse", "internal"}, "nobody", []string{"refuse0"}, false, 0, "", "nobody", true},
		{"a refusal beats a failure", []string{"fail", "refuse"}, "u", []string{"fail0", "refuse1"}, false, 0, "", "u", true},
		{"every entry fails", []string{"fail", "fail"}, "u", []string{"fail0", "fail1"}, false, amqp.ConnectionForced, "", "u", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			var chain auth.Chain
			for i, e := range tc.entries {
				name := e + string(rune('0'+i))
				switch e {
				case "refuse":
					chain = append(chain, auth.Backend{Name: name, Authn: authnFunc{refuse, &asked, name}, Authz: z})
				case "fail":
					chain = append(chain, auth.Backend{Name: name, Authn: authnFunc{fail, &asked, name}, Authz: z})
				case "accept":
					chain = append(chain, auth.Backend{Name: name, Authn: authnFunc{accept, &asked, name}, Authz: z})
				case "internal":
					chain = append(chain, auth.Internal)
				}
			}
			l := newLogins(users{names: []string{"u"}}, chain, false)
			require.True(t, l.Chained())
			at := session.LoginAttempt{Mechanism: "PLAIN", User: tc.user, Password: "pw", Peer: remote}
			ok, reason, err := l.AMQP(&at)
			require.Equal(t, tc.asked, asked, "the entries asked, in order")
			require.Equal(t, tc.ok, ok)
			require.Empty(t, reason, "a refusal does not say whether the user exists")
			requireCode(t, tc.code, err)
			require.Equal(t, tc.as, at.User)
			if tc.backend == "" {
				require.Nil(t, at.Authz)
			} else {
				require.NotNil(t, at.Authz)
				require.Equal(t, tc.backend, at.Authz.Backend)
			}
			require.Equal(t, tc.counted, counted(l, remote), "the failure counted against the source")
		})
	}
}

// TestDirectAccess: a direct Channel opened as a user. Without a chain
// the user must exist (no password asked) and the stored grants decide;
// with one, the chain is asked with auth.MechanismDirect and no secret,
// and the entry that let the user in decides the vhost (530 when it
// refuses); a chain that refuses is 403, one that does not answer 320,
// and a caller that left gets its context's error.
func TestDirectAccess(t *testing.T) {
	var got auth.Request
	direct := func(req auth.Request) (auth.Identity, error) {
		got = req
		if req.User == "nobody" {
			return auth.Identity{}, auth.Refuse("no")
		}
		if req.User == "slow" {
			return auth.Identity{}, errors.New("down")
		}
		return auth.Identity{User: req.User}, nil
	}
	var asked []string
	hook := auth.Backend{Name: "hook", Authn: authnFunc{direct, &asked, "hook"}, Authz: authzVHosts{"/": true}}
	storedAccess := session.NewAccess("u", "/", nil)
	var storedAsked string
	stored := func(_ context.Context, user, vh string) (*session.Access, *amqp.Error, error) {
		storedAsked = user + "@" + vh
		switch vh {
		case "closed":
			return nil, amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "access to vhost 'closed' refused for user '%s'", user), nil
		case "down":
			return nil, nil, errors.New("no leader")
		}
		return storedAccess, nil, nil
	}
	for _, tc := range []struct {
		name   string
		chain  auth.Chain
		us     users
		user   string
		vhost  string
		code   uint16 // 0: allowed
		stored string // what stored was asked; "": not asked
		mech   string // what the chain was asked with; "": not asked
	}{
		{"database: user exists", nil, users{names: []string{"u"}}, "u", "/", 0, "u@/", ""},
		{"database: no such user", nil, users{names: []string{"u"}}, "v", "/", amqp.AccessRefused, "", ""},
		{"database: vhost refused", nil, users{names: []string{"u"}}, "u", "closed", amqp.NotAllowed, "u@closed", ""},
		{"database: store down", nil, users{err: errors.New("no leader")}, "u", "/", amqp.ConnectionForced, "", ""},
		{"database: grants down", nil, users{names: []string{"u"}}, "u", "down", amqp.ConnectionForced, "u@down", ""},
		{"chain: backend decides", auth.Chain{hook}, users{}, "u", "/", 0, "", auth.MechanismDirect},
		{"chain: backend refuses the vhost", auth.Chain{hook}, users{}, "u", "other", amqp.NotAllowed, "", auth.MechanismDirect},
		{"chain: refused", auth.Chain{hook}, users{}, "nobody", "/", amqp.AccessRefused, "", auth.MechanismDirect},
		{"chain: no answer", auth.Chain{hook}, users{}, "slow", "/", amqp.ConnectionForced, "", auth.MechanismDirect},
		{"chain: internal decides by the stored grants", auth.Chain{auth.Internal}, users{names: []string{"u"}}, "u", "/", 0, "u@/", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, storedAsked, asked = auth.Request{}, "", nil
			l := newLogins(tc.us, tc.chain, false)
			a, err := l.DirectAccess(context.Background(), tc.user, tc.vhost, stored)
			if tc.code == 0 {
				require.NoError(t, err)
				require.NotNil(t, a)
				if tc.stored != "" {
					require.Same(t, storedAccess, a, "the stored grants decide")
				} else {
					require.NotSame(t, storedAccess, a, "the backend decides")
				}
			} else {
				requireCode(t, tc.code, err)
			}
			require.Equal(t, tc.stored, storedAsked)
			require.Equal(t, tc.mech, got.Mechanism)
			require.Empty(t, got.Secret, "a direct login sends no secret")
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newLogins(users{err: errors.New("no leader")}, nil, false).DirectAccess(ctx, "u", "/", stored)
	require.ErrorIs(t, err, context.Canceled, "a caller that left gets its context's error")
}

// TestPasswordAndUpdateSecret: HTTP basic auth through the chain names
// the backend's user and its Authorizer, or wraps login.ErrRefused /
// login.ErrUnavailable; update-secret accepts only a new credential of
// the same user, and without a chain nothing can check it.
func TestPasswordAndUpdateSecret(t *testing.T) {
	var asked []string
	tokens := func(req auth.Request) (auth.Identity, error) {
		switch req.Secret {
		case "good":
			return auth.Identity{User: req.User, Tags: []string{"management"}, Expires: time.Unix(2_000_000, 0)}, nil
		case "other":
			return auth.Identity{User: "someone-else"}, nil
		case "down":
			return auth.Identity{}, errors.New("down")
		}
		return auth.Identity{}, auth.Refuse("bad token")
	}
	chain := auth.Chain{{Name: "oauth", Authn: authnFunc{tokens, &asked, "oauth"}, Authz: authzVHosts{}}}
	l := newLogins(users{}, chain, false)
	for _, tc := range []struct {
		secret string
		err    error
	}{{"good", nil}, {"bad", login.ErrRefused}, {"down", login.ErrUnavailable}} {
		u, z, err := l.Password(context.Background(), remote, "u", tc.secret)
		if tc.err != nil {
			require.ErrorIs(t, err, tc.err, tc.secret)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, meta.User{Name: "u", Tags: meta.UserTags{"management"}}, u)
		require.Equal(t, "oauth", z.Backend)
	}

	for _, tc := range []struct {
		name   string
		secret string
		ok     bool
		err    bool
	}{{"same user", "good", true, false}, {"another user", "other", false, false}, {"refused", "bad", false, false}, {"down", "down", false, true}} {
		ok, z, exp, err := l.UpdateSecret("u", tc.secret, loopback)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.err, err != nil, tc.name)
		if tc.ok {
			require.Equal(t, "oauth", z.Backend)
			require.Equal(t, time.Unix(2_000_000, 0), exp)
		}
	}
	ok, _, _, err := newLogins(users{names: []string{"u"}}, nil, false).UpdateSecret("u", "pw", loopback)
	require.NoError(t, err)
	require.False(t, ok, "without a chain no secret can be checked")
}
