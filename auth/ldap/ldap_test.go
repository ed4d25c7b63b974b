package ldap_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/auth/ldap"
	"github.com/warrenmq/broker/internal/slapdtest"
)

const (
	people = "ou=People," + slapdtest.Suffix
	groups = "ou=Groups," + slapdtest.Suffix
)

// directory: alice (administrators, managers), bob (managers, vh1-users),
// and two users whose names hold DN and filter metacharacters.
const directory = `dn: ` + people + `
objectClass: organizationalUnit
ou: People

dn: cn=alice,` + people + `
objectClass: inetOrgPerson
cn: alice
sn: A
uid: alice
userPassword: alicepw

dn: cn=bob,` + people + `
objectClass: inetOrgPerson
cn: bob
sn: B
uid: bob
userPassword: bobpw

dn: cn=x*(y),` + people + `
objectClass: inetOrgPerson
cn: x*(y)
sn: X
uid: x*(y)
userPassword: xpw

dn: cn=c\,d\+e,` + people + `
objectClass: inetOrgPerson
cn: c,d+e
sn: C
uid: c,d+e
userPassword: cpw

dn: cn=twin1,` + people + `
objectClass: inetOrgPerson
cn: twin1
sn: T
uid: twin
userPassword: twinpw

dn: cn=twin2,` + people + `
objectClass: inetOrgPerson
cn: twin2
sn: T
uid: twin
userPassword: twinpw

dn: ` + groups + `
objectClass: organizationalUnit
ou: Groups

dn: cn=administrators,` + groups + `
objectClass: groupOfNames
cn: administrators
member: cn=alice,` + people + `

dn: cn=managers,` + groups + `
objectClass: groupOfNames
cn: managers
member: cn=alice,` + people + `
member: cn=bob,` + people + `

dn: cn=ops,` + groups + `
objectClass: groupOfNames
cn: ops
member: cn=bob,` + people + `

dn: cn=staff,` + groups + `
objectClass: groupOfNames
cn: staff
member: cn=ops,` + groups + `

dn: cn=loop-a,` + groups + `
objectClass: groupOfNames
cn: loop-a
member: cn=alice,` + people + `
member: cn=loop-b,` + groups + `

dn: cn=loop-b,` + groups + `
objectClass: groupOfNames
cn: loop-b
member: cn=loop-a,` + groups + `

dn: cn=vh1-users,` + groups + `
objectClass: groupOfNames
cn: vh1-users
member: cn=bob,` + people + `
`

// server starts a slapd with directory for the test.
func server(t *testing.T) *slapdtest.Server {
	t.Helper()
	return slapdtest.Start(t, directory)
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// baseConfig is RabbitMQ's documented example: user_dn_pattern, tags and
// vhost access from groups, a resource query by permission.
func baseConfig(s *slapdtest.Server) ldap.Config {
	return ldap.Config{
		Servers:       []string{s.Host},
		Port:          s.Port,
		UserDNPattern: "cn=${username}," + people,
		Timeout:       5 * time.Second,
		TagQueries: map[string]string{
			"administrator": `{in_group, "cn=administrators,` + groups + `"}`,
			"management":    `{in_group, "cn=managers,` + groups + `"}`,
		},
		VHostAccessQuery: `{'or', [{equals, "${vhost}", "/"}, {in_group, "cn=${vhost}-users,` + groups + `"}]}`,
		ResourceAccessQuery: `{for, [{permission, configure, {in_group, "cn=administrators,` + groups + `"}},
			{permission, write, {constant, true}},
			{permission, read, {match, {string, "${name}"}, {string, "^${username}-"}}}]}`,
		TopicAccessQuery: `{match, {string, "${routing_key}"}, {string, "^${username}\\."}}`,
	}
}

func newBackend(t *testing.T, c ldap.Config) *ldap.Backend {
	t.Helper()
	b, err := ldap.New(c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func login(b *ldap.Backend, user, pw string) (auth.Identity, error) {
	return b.Authenticate(context.Background(), auth.Request{Mechanism: "PLAIN", User: user, Secret: pw})
}

// TestAuthenticate: logins by DN pattern and by DN lookup (anonymous,
// as a service account, and as the user): good password, bad password,
// empty password, unknown user, and names with DN and filter
// metacharacters, which log in as themselves and never as anyone else.
func TestAuthenticate(t *testing.T) {
	s := server(t)
	pattern := baseConfig(s)
	anonLookup := baseConfig(s)
	anonLookup.UserDNPattern = ""
	anonLookup.DNLookupAttribute, anonLookup.DNLookupBase = "uid", people
	anonLookup.DNLookupBind = ldap.Bind{Anon: true}
	svcLookup := anonLookup
	svcLookup.DNLookupBind = ldap.Bind{DN: slapdtest.RootDN, Password: slapdtest.RootPass}
	svcLookup.OtherBind = svcLookup.DNLookupBind
	userLookup := anonLookup
	userLookup.UserDNPattern = "cn=${username}," + people
	// Bound with the filled pattern first, then looked up by it: OpenLDAP
	// keeps each entry's DN in the entryDN attribute.
	userLookup.DNLookupAttribute = "entryDN"
	userLookup.DNLookupBind = ldap.Bind{}

	for name, cfg := range map[string]ldap.Config{"pattern": pattern, "lookup anon": anonLookup, "lookup service": svcLookup, "lookup as user": userLookup} {
		t.Run(name, func(t *testing.T) {
			b := newBackend(t, cfg)
			for _, tc := range []struct {
				user, pw string
				ok       bool
				tags     []string
			}{
				{"alice", "alicepw", true, []string{"administrator", "management"}},
				{"bob", "bobpw", true, []string{"management"}},
				{"alice", "wrong", false, nil},
				{"alice", "", false, nil},
				{"nobody", "x", false, nil},
				{"x*(y)", "xpw", true, nil},
				{"c,d+e", "cpw", true, nil},
				// Metacharacters that would widen an unescaped filter or
				// move an unescaped DN: (uid=*) matches everyone,
				// (uid=al*) alice, cn=alice,ou=People... another entry.
				{"*", "alicepw", false, nil},
				{"al*", "alicepw", false, nil},
				{"*)(uid=alice", "alicepw", false, nil},
				{"alice)(|(uid=*", "alicepw", false, nil},
				{"alice," + people, "alicepw", false, nil},
				{"x*(y", "xpw", false, nil},
				{"\x00", "x", false, nil},
				{"twin", "twinpw", false, nil}, // two entries have uid twin
				{strings.Repeat("a", 256), "x", false, nil},
				{"\xff", "x", false, nil},
			} {
				id, err := login(b, tc.user, tc.pw)
				if !tc.ok {
					require.ErrorIs(t, err, auth.ErrRefused, "%q/%q", tc.user, tc.pw)
					continue
				}
				require.NoError(t, err, "%q", tc.user)
				require.Equal(t, tc.user, id.User)
				require.ElementsMatch(t, tc.tags, id.Tags, "%q", tc.user)
			}
		})
	}
}

// TestAmbiguousLookup: a DN lookup that finds two entries refuses.
func TestAmbiguousLookup(t *testing.T) {
	s := server(t)
	c := baseConfig(s)
	c.UserDNPattern, c.DNLookupAttribute, c.DNLookupBase = "", "uid", people
	c.DNLookupBind = ldap.Bind{Anon: true}
	_, err := login(newBackend(t, c), "twin", "twinpw")
	require.ErrorIs(t, err, auth.ErrRefused)
	require.ErrorContains(t, err, "several entries match")
}

// TestEmptyPasswordNeverReachesTheServer: an empty password is refused
// with RabbitMQ's reason even when the directory is down.
func TestEmptyPasswordNeverReachesTheServer(t *testing.T) {
	b := newBackend(t, ldap.Config{Servers: []string{"127.0.0.1:1"}})
	_, err := login(b, "alice", "")
	require.ErrorIs(t, err, auth.ErrRefused)
	require.ErrorContains(t, err, "unauthenticated bind not allowed")
	require.Zero(t, b.Dials())
}

// TestAuthorize: vhost access by group membership (and a constant for
// "/"), a resource query by permission (configure for administrators,
// write for all, read of the user's own queues with the name quoted in
// the regular expression), and a topic query on the routing key.
func TestAuthorize(t *testing.T) {
	s := server(t)
	for name, cfg := range map[string]ldap.Config{
		"other_bind as_user": baseConfig(s),
		"other_bind service": func() ldap.Config {
			c := baseConfig(s)
			c.OtherBind = ldap.Bind{DN: slapdtest.RootDN, Password: slapdtest.RootPass}
			return c
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			b := newBackend(t, cfg)
			ctx := context.Background()
			for _, u := range [][2]string{{"alice", "alicepw"}, {"bob", "bobpw"}, {"x*(y)", "xpw"}} {
				_, err := login(b, u[0], u[1])
				require.NoError(t, err)
			}
			alice, bob, x := auth.Identity{User: "alice"}, auth.Identity{User: "bob"}, auth.Identity{User: "x*(y)"}
			vhost := func(id auth.Identity, v string) bool {
				ok, err := b.VHostAccess(ctx, id, v)
				require.NoError(t, err)
				return ok
			}
			require.True(t, vhost(alice, "/"))
			require.False(t, vhost(alice, "vh1"))
			require.True(t, vhost(bob, "vh1"))
			require.False(t, vhost(bob, "vh2"))
			require.False(t, vhost(bob, "*"), "a vhost name is escaped into the group DN too")

			res := func(id auth.Identity, name string, p auth.Permission) bool {
				ok, err := b.ResourceAccess(ctx, id, auth.Resource{VHost: "/", Kind: "queue", Name: name}, p)
				require.NoError(t, err)
				return ok
			}
			require.True(t, res(alice, "q", auth.Configure))
			require.False(t, res(bob, "q", auth.Configure))
			require.True(t, res(bob, "q", auth.Write))
			require.True(t, res(bob, "bob-q", auth.Read))
			require.False(t, res(bob, "alice-q", auth.Read))
			require.True(t, res(x, "x*(y)-q", auth.Read))
			require.False(t, res(x, "xxy-q", auth.Read), "the name is quoted in the regular expression")

			topic := func(id auth.Identity, key string) bool {
				ok, err := b.TopicAccess(ctx, id, auth.Resource{VHost: "/", Kind: "exchange", Name: "amq.topic"}, auth.Write, key)
				require.NoError(t, err)
				return ok
			}
			require.True(t, topic(bob, "bob.news"))
			require.False(t, topic(bob, "alice.news"))
		})
	}
}

// TestAuthorizeWithoutLogin: with other_bind = as_user a user who has not
// logged in through the backend cannot be decided (no password to bind
// with): an error, not a yes; with a service account it can.
func TestAuthorizeWithoutLogin(t *testing.T) {
	s := server(t)
	b := newBackend(t, baseConfig(s))
	_, err := b.VHostAccess(context.Background(), auth.Identity{User: "bob"}, "vh1")
	require.Error(t, err)
	require.NotErrorIs(t, err, auth.ErrRefused)

	c := baseConfig(s)
	c.OtherBind = ldap.Bind{DN: slapdtest.RootDN, Password: slapdtest.RootPass}
	b = newBackend(t, c)
	ok, err := b.VHostAccess(context.Background(), auth.Identity{User: "bob"}, "vh1")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.VHostAccess(context.Background(), auth.Identity{User: "nobody"}, "vh1")
	require.NoError(t, err)
	require.False(t, ok)
}

// TestTLS: use_ssl and use_starttls log in when the server's certificate
// verifies against the configured CA file; without that CA the login is
// an error (try again), not a refusal, and no password was sent.
func TestTLS(t *testing.T) {
	s := server(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, s.CA.PEM, 0o600))
	for _, tc := range []struct {
		name      string
		ssl, star bool
		port      int
	}{{"use_ssl", true, false, s.TLSPort}, {"use_starttls", false, true, s.Port}} {
		t.Run(tc.name, func(t *testing.T) {
			c := baseConfig(s)
			c.UseSSL, c.UseStartTLS, c.Port = tc.ssl, tc.star, tc.port
			c.SSL.CACertFile = caFile
			id, err := login(newBackend(t, c), "alice", "alicepw")
			require.NoError(t, err)
			require.Equal(t, "alice", id.User)

			c.SSL.CACertFile = ""
			_, err = login(newBackend(t, c), "alice", "alicepw")
			require.Error(t, err)
			require.NotErrorIs(t, err, auth.ErrRefused)
		})
	}
}

// hungServer accepts TCP connections and never answers on them.
func hungServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// TestHungServer: a server that accepts and never answers makes a login
// an error at Config.Timeout (or the caller's deadline), never a
// refusal, for plain LDAP, StartTLS and LDAPS alike; a second server
// after it in Servers is not reached past the timeout, but one after a
// server that refuses connections is.
func TestHungServer(t *testing.T) {
	hung := hungServer(t)
	for _, tc := range []struct {
		name      string
		ssl, star bool
	}{{"plain", false, false}, {"starttls", false, true}, {"ldaps", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, ldap.Config{Servers: []string{hung}, UseSSL: tc.ssl, UseStartTLS: tc.star,
				SSL: ldap.SSLOptions{VerifyNone: true}, Timeout: 200 * time.Millisecond, UserDNPattern: "cn=${username}," + people})
			_, err := login(b, "alice", "alicepw")
			require.Error(t, err)
			require.NotErrorIs(t, err, auth.ErrRefused)
			require.ErrorIs(t, err, context.DeadlineExceeded)

			// No Timeout: the caller's context bounds it.
			b = newBackend(t, ldap.Config{Servers: []string{hung}, UseSSL: tc.ssl, UseStartTLS: tc.star,
				SSL: ldap.SSLOptions{VerifyNone: true}, UserDNPattern: "cn=${username}," + people})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err = b.Authenticate(ctx, auth.Request{User: "alice", Secret: "alicepw"})
			require.ErrorIs(t, err, context.DeadlineExceeded)
		})
	}
	t.Run("failover", func(t *testing.T) {
		s := server(t)
		closed := func() string {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			a := l.Addr().String()
			require.NoError(t, l.Close())
			return a
		}()
		c := baseConfig(s)
		c.Servers = []string{closed, s.Addr()}
		_, err := login(newBackend(t, c), "alice", "alicepw")
		require.NoError(t, err)
	})
}

// TestPoolBounded: many concurrent logins and decisions share at most
// PoolSize connections, and a pooled connection bound as one user checks
// the next user's password afresh.
func TestPoolBounded(t *testing.T) {
	s := server(t)
	c := baseConfig(s)
	c.PoolSize = 2
	b := newBackend(t, c)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user, pw, want := "alice", "alicepw", true
			switch i % 3 {
			case 1:
				user, pw = "bob", "bobpw"
			case 2:
				pw, want = "wrong", false
			}
			_, err := login(b, user, pw)
			if want != (err == nil) {
				errs <- errors.Join(errors.New(user+"/"+pw), err)
			}
			if user == "bob" && want {
				// Decisions share the pool and the remembered logins.
				ok, err := b.VHostAccess(context.Background(), auth.Identity{User: "bob"}, "vh1")
				if err != nil || !ok {
					errs <- errors.Join(errors.New("bob on vh1"), err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, b.Dials(), int64(2))
	require.Positive(t, b.Dials())
}

// TestDirectoryDown: with slapd stopped a login is an error (try again),
// not a refusal; when it is back on the same port the next login works
// (the pooled connection it closed is not reused).
func TestDirectoryDown(t *testing.T) {
	s := server(t)
	b := newBackend(t, baseConfig(s))
	_, err := login(b, "alice", "alicepw")
	require.NoError(t, err)
	s.Stop()
	_, err = login(b, "alice", "alicepw")
	require.Error(t, err)
	require.NotErrorIs(t, err, auth.ErrRefused)
	s.Restart(t)
	_, err = login(b, "alice", "alicepw")
	require.NoError(t, err)

	// A restart between two logins: the pooled connection died with the
	// old process.
	s.Restart(t)
	_, err = login(b, "bob", "bobpw")
	require.NoError(t, err)
}

// TestExternal: a passwordless EXTERNAL login (the broker verified the
// client certificate) or DIRECT one (a direct Channel as a named user) is
// accepted for an existing entry with its tags when other_bind is a
// service account or anon, and refused for an unknown user, with
// other_bind as_user, without a certificate, or for any other mechanism.
func TestExternal(t *testing.T) {
	s := server(t)
	cert := &x509.Certificate{}
	ext := func(b *ldap.Backend, user string, cert *x509.Certificate, mech string) (auth.Identity, error) {
		return b.Authenticate(context.Background(), auth.Request{Mechanism: mech, User: user, Cert: cert})
	}
	for name, cfg := range map[string]ldap.Config{
		"pattern": func() ldap.Config {
			c := baseConfig(s)
			c.OtherBind = ldap.Bind{DN: slapdtest.RootDN, Password: slapdtest.RootPass}
			return c
		}(),
		"lookup": func() ldap.Config {
			c := baseConfig(s)
			c.UserDNPattern, c.DNLookupAttribute, c.DNLookupBase = "", "uid", people
			c.DNLookupBind = ldap.Bind{Anon: true}
			c.OtherBind = ldap.Bind{Anon: true}
			return c
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			b := newBackend(t, cfg)
			id, err := ext(b, "alice", cert, "EXTERNAL")
			require.NoError(t, err)
			require.ElementsMatch(t, []string{"administrator", "management"}, id.Tags)
			// A direct Channel opened as a named user (the program vouches).
			id, err = ext(b, "bob", nil, "DIRECT")
			require.NoError(t, err)
			require.ElementsMatch(t, []string{"management"}, id.Tags)
			for _, tc := range []struct {
				user string
				cert *x509.Certificate
				mech string
			}{{"nobody", cert, "EXTERNAL"}, {"*", cert, "EXTERNAL"}, {"alice", nil, "EXTERNAL"}, {"alice", cert, "PLAIN"},
				{"alice", nil, "HTTP"}, {"nobody", nil, "DIRECT"}} {
				_, err := ext(b, tc.user, tc.cert, tc.mech)
				require.ErrorIs(t, err, auth.ErrRefused, "%+v", tc)
			}
		})
	}
	_, err := ext(newBackend(t, baseConfig(s)), "alice", cert, "EXTERNAL")
	require.ErrorIs(t, err, auth.ErrRefused, "other_bind as_user has no password to bind with")
}

// TestNestedGroups: in_group_nested finds membership through groups that
// are members of the group (bob in ops in staff), not for users outside
// it, and a membership cycle (loop-a, loop-b) ends the walk.
func TestNestedGroups(t *testing.T) {
	s := server(t)
	c := baseConfig(s)
	c.OtherBind = ldap.Bind{DN: slapdtest.RootDN, Password: slapdtest.RootPass}
	c.GroupLookupBase = groups
	c.VHostAccessQuery = `{in_group_nested, "cn=${vhost},` + groups + `"}`
	b := newBackend(t, c)
	for _, tc := range []struct {
		user, vhost string
		want        bool
	}{
		{"bob", "ops", true}, {"bob", "staff", true}, {"alice", "staff", false}, {"bob", "administrators", false},
		{"alice", "loop-a", true}, {"alice", "loop-b", true}, {"alice", "nonexistent", false}, {"bob", "loop-a", false},
	} {
		ok, err := b.VHostAccess(context.Background(), auth.Identity{User: tc.user}, tc.vhost)
		require.NoError(t, err)
		require.Equal(t, tc.want, ok, "%s in %s", tc.user, tc.vhost)
	}
}

// TestAttributeQuery: equals against a multi-valued attribute read from
// the directory holds when one of its values is equal (the managers
// group's member values), as RabbitMQ compares them.
func TestAttributeQuery(t *testing.T) {
	s := server(t)
	c := baseConfig(s)
	c.TagQueries = map[string]string{
		"monitoring":  `{equals, {attribute, "cn=managers,` + groups + `", "member"}, "${user_dn}"}`,
		"policymaker": `{match, {attribute, "cn=managers,` + groups + `", "member"}, "^cn=${username},"}`,
	}
	b := newBackend(t, c)
	for user, want := range map[[2]string][]string{
		{"bob", "bobpw"}:     {"monitoring", "policymaker"},
		{"alice", "alicepw"}: {"monitoring", "policymaker"},
		{"x*(y)", "xpw"}:     nil,
	} {
		id, err := login(b, user[0], user[1])
		require.NoError(t, err)
		require.ElementsMatch(t, want, id.Tags, user[0])
	}
}

// TestUserBindPattern: user_bind_pattern is the name bound with, while
// user_dn_pattern still names the entry the queries ask about; a
// DOMAIN\user name gives ${ad_domain} and ${ad_user}.
func TestUserBindPattern(t *testing.T) {
	s := server(t)
	c := baseConfig(s)
	c.UserBindPattern = "cn=${ad_user},ou=${ad_domain}," + slapdtest.Suffix
	c.UserDNPattern = "cn=${ad_user},ou=People," + slapdtest.Suffix
	b := newBackend(t, c)
	id, err := login(b, `People\alice`, "alicepw")
	require.NoError(t, err)
	require.Equal(t, `People\alice`, id.User)
	require.ElementsMatch(t, []string{"administrator", "management"}, id.Tags)
	_, err = login(b, `Elsewhere\alice`, "alicepw")
	require.ErrorIs(t, err, auth.ErrRefused)

	// The DN the queries use is user_dn_pattern's, here an entry that
	// does not exist: the bind succeeds, no group holds it (the queries
	// bind as a service account: as_user would bind as that DN).
	c.UserDNPattern = "cn=${username},ou=People," + slapdtest.Suffix
	c.OtherBind = ldap.Bind{DN: slapdtest.RootDN, Password: slapdtest.RootPass}
	b = newBackend(t, c)
	id, err = login(b, `People\alice`, "alicepw")
	require.NoError(t, err)
	require.Empty(t, id.Tags)
}

// dropProxy forwards TCP connections to a server; drop makes each
// connection open at that moment close when the client next sends on it,
// as a server (or a firewall) that forgot an idle connection does.
type dropProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	dead   map[net.Conn]*atomic.Bool
	wg     sync.WaitGroup
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &dropProxy{l: l, target: target, dead: map[net.Conn]*atomic.Bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = l.Close()
		p.mu.Lock()
		for c := range p.dead {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *dropProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		dead := new(atomic.Bool)
		p.mu.Lock()
		p.dead[client], p.dead[server] = dead, dead
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { // client -> server, unless dropped
			defer p.wg.Done()
			buf := make([]byte, 4096)
			for {
				n, err := client.Read(buf)
				if err != nil || dead.Load() {
					_ = client.Close()
					_ = server.Close()
					return
				}
				if _, err := server.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
		go func() { // server -> client
			defer p.wg.Done()
			_, _ = io.Copy(client, server)
		}()
	}
}

func (p *dropProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.dead {
		d.Store(true)
	}
}

// TestStalePooledConnection: a pooled connection that the far side
// dropped while idle fails on first use; the call is retried once on a
// fresh connection and succeeds.
func TestStalePooledConnection(t *testing.T) {
	s := server(t)
	p := newDropProxy(t, s.Addr())
	c := baseConfig(s)
	c.Servers = []string{p.l.Addr().String()}
	b := newBackend(t, c)
	_, err := login(b, "alice", "alicepw")
	require.NoError(t, err)
	require.EqualValues(t, 1, b.Dials())
	p.drop()
	id, err := login(b, "bob", "bobpw")
	require.NoError(t, err)
	require.Equal(t, []string{"management"}, id.Tags)
	require.EqualValues(t, 2, b.Dials())
}

// TestIdleTimeout: a pooled connection idle longer than IdleTimeout is
// closed and replaced; within it, reused.
func TestIdleTimeout(t *testing.T) {
	s := server(t)
	for _, tc := range []struct {
		idle  time.Duration
		dials int64
	}{{time.Nanosecond, 3}, {time.Hour, 1}, {-1, 1}} {
		c := baseConfig(s)
		c.IdleTimeout = tc.idle
		b := newBackend(t, c)
		for range 3 {
			_, err := login(b, "alice", "alicepw")
			require.NoError(t, err)
		}
		require.Equal(t, tc.dials, b.Dials(), "idle_timeout %v", tc.idle)
	}
}
