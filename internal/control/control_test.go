package control

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/access"
	"github.com/warrenmq/broker/internal/limits"
	"github.com/warrenmq/broker/internal/policystore"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/internal/vhosts"
	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
)

// closed is a CloseConns that records what it was asked to close, as the
// connections it would select among conns.
type closed struct {
	conns []session.ConnInfo
	got   []string // "text: ids"
}

func (c *closed) close(match func(session.ConnInfo) bool, text string) {
	var ids []string
	for _, in := range c.conns {
		if match(in) {
			ids = append(ids, in.ID)
		}
	}
	c.got = append(c.got, text+": "+strings.Join(ids, ","))
}

// plane is a Plane over a memory store with vhosts "/" and "v" open, the
// user "u" and "w" stored, and connections of u on "/" (c1) and on "v"
// (c2) and of w on "v" (c3).
func plane(t *testing.T) (*Plane, *metamemory.Store, *closed) {
	t.Helper()
	ctx := context.Background()
	st := metamemory.New()
	set := &vhosts.Set{Store: st, Log: slog.New(slog.DiscardHandler)}
	set.Open = func(ctx context.Context, rec meta.VHost) (*vhost.VHost, error) {
		return vhost.Open(ctx, vhost.Config{Name: rec.Name, Store: st,
			StartQueue: func(context.Context, meta.Queue, queue.Features) (*queue.Queue, error) {
				return nil, errors.New("test: no queue runtime")
			}})
	}
	require.NoError(t, set.OpenAll(ctx, []string{"/", "v"}))
	t.Cleanup(set.Close)
	c := &closed{conns: []session.ConnInfo{{ID: "c1", User: "u", VHost: "/"}, {ID: "c2", User: "u", VHost: "v"}, {ID: "c3", User: "w", VHost: "v"}}}
	p := &Plane{
		Meta:   st,
		Access: &access.Registry{},
		Limits: &limits.Limits{Store: st},
		Policies: &policystore.Keeper{Store: st, Log: slog.New(slog.DiscardHandler),
			VHost:  func(name string) (policystore.Target, bool) { return set.Lookup(name) },
			VHosts: set.Names},
		VHosts:     set,
		CloseConns: c.close,
	}
	require.NoError(t, p.SeedUsers(ctx, []meta.User{{Name: "u", Password: "pw"}, {Name: "w", Password: "pw"}}, []string{"/", "v"}))
	return p, st, c
}

// kind is how a refused call's error is classified: the management
// API's 400 (meta.ErrInvalid), 404 (meta.ErrNotFound), or another error.
func kind(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, meta.ErrInvalid):
		return "invalid"
	case errors.Is(err, meta.ErrNotFound):
		return "not found"
	}
	return "error"
}

// TestUsers: PutUser refuses a name of 0 or more than 255 bytes and a
// hash it cannot import as invalid input; GetUser of a missing user is
// not found; a stored user is read with its password hashed and its
// limits object; SeedUsers leaves a stored user as it is.
func TestUsers(t *testing.T) {
	p, _, _ := plane(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		u    meta.User
		want string
	}{
		{"empty name", meta.User{Password: "x"}, "invalid"},
		{"name too long", meta.User{Name: strings.Repeat("n", 256), Password: "x"}, "invalid"},
		{"hash of an unknown algorithm", meta.User{Name: "h", PasswordHash: "abc", HashingAlgorithm: "rabbit_password_hashing_none"}, "invalid"},
		{"hash that is not base64", meta.User{Name: "h", PasswordHash: "not base64!"}, "invalid"},
		{"password", meta.User{Name: "new", Password: "secret", Tags: meta.UserTags{"management"}}, "ok"},
		{"name of 255 bytes", meta.User{Name: strings.Repeat("n", 255), Password: "x"}, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, kind(p.PutUser(ctx, tc.u)))
		})
	}
	u, err := p.GetUser(ctx, "new")
	require.NoError(t, err)
	require.Empty(t, u.Password, "only the hash is kept")
	require.NotEmpty(t, u.PasswordHash)
	require.Equal(t, meta.UserTags{"management"}, u.Tags)
	require.NotNil(t, u.Limits, "a definitions file carries an empty limits object")
	_, err = p.GetUser(ctx, "nobody")
	require.Equal(t, "not found", kind(err))

	require.NoError(t, p.SeedUsers(ctx, []meta.User{{Name: "new", Password: "other", Tags: meta.UserTags{"administrator"}}}, []string{"/"}))
	again, err := p.GetUser(ctx, "new")
	require.NoError(t, err)
	require.Equal(t, u, again, "a stored user is not seeded again")
	_, err = p.GetPermission(ctx, "new", "/")
	require.Equal(t, "not found", kind(err), "nor given the seed's permissions")
}

// TestPermissions: PutPermission needs the user and the vhost ("" is "/")
// and expressions that compile, and the user's open connections on that
// vhost use it at once; DeletePermission refuses them every check.
func TestPermissions(t *testing.T) {
	p, _, _ := plane(t)
	ctx := context.Background()
	open := p.Access.Shared("u", "/", nil) // u's connections on "/"
	other := p.Access.Shared("u", "v", nil)
	for _, tc := range []struct {
		name string
		perm meta.Permission
		want string
	}{
		{"expression that does not compile", meta.Permission{User: "u", VHost: "/", Configure: "(", Write: ".*", Read: ".*"}, "invalid"},
		{"no such user", meta.Permission{User: "nobody", VHost: "/", Configure: ".*", Write: ".*", Read: ".*"}, "not found"},
		{"no such vhost", meta.Permission{User: "u", VHost: "gone", Configure: ".*", Write: ".*", Read: ".*"}, "not found"},
		{"default vhost by \"\"", meta.Permission{User: "u", VHost: "", Configure: "^c$", Write: "^w$", Read: "^r$"}, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, kind(p.PutPermission(ctx, tc.perm)))
		})
	}
	got, err := p.GetPermission(ctx, "u", "")
	require.NoError(t, err)
	require.Equal(t, meta.Permission{User: "u", VHost: "/", Configure: "^c$", Write: "^w$", Read: "^r$"}, got)
	want, err := access.CompileGrant(got)
	require.NoError(t, err)
	require.Equal(t, want, open.Grant(), "the open connections use the new permission")
	require.Nil(t, other.Grant(), "those on other vhosts keep theirs")

	require.NoError(t, p.DeletePermission(ctx, "u", "/"))
	require.Nil(t, open.Grant(), "a deleted permission refuses every check")
	_, err = p.GetPermission(ctx, "u", "/")
	require.Equal(t, "not found", kind(err))
}

// TestTopicPermissions: PutTopicPermission needs expressions that compile,
// the user and the vhost, and reports whether it created the user's
// permission on that exchange; DeleteTopicPermission of "" removes those
// on every exchange of the vhost, and open connections follow both.
func TestTopicPermissions(t *testing.T) {
	p, st, _ := plane(t)
	ctx := context.Background()
	open := p.Access.Shared("u", "/", nil)
	for _, tc := range []struct {
		name    string
		tp      meta.TopicPermission
		want    string
		created bool
	}{
		{"expression that does not compile", meta.TopicPermission{User: "u", VHost: "/", Exchange: "amq.topic", Write: "(", Read: ".*"}, "invalid", false},
		{"no such user", meta.TopicPermission{User: "nobody", VHost: "/", Exchange: "amq.topic", Write: ".*", Read: ".*"}, "not found", false},
		{"no such vhost", meta.TopicPermission{User: "u", VHost: "gone", Exchange: "amq.topic", Write: ".*", Read: ".*"}, "not found", false},
		{"new", meta.TopicPermission{User: "u", VHost: "", Exchange: "amq.topic", Write: "^a", Read: ".*"}, "ok", true},
		{"replaced", meta.TopicPermission{User: "u", VHost: "/", Exchange: "amq.topic", Write: "^b", Read: ".*"}, "ok", false},
		{"another exchange", meta.TopicPermission{User: "u", VHost: "/", Exchange: "logs", Write: ".*", Read: ".*"}, "ok", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			created, err := p.PutTopicPermission(ctx, tc.tp)
			require.Equal(t, tc.want, kind(err))
			require.Equal(t, tc.created, created)
		})
	}
	require.Len(t, open.Topics(), 2, "the open connections use them")
	tps, err := access.TopicPermissionsOf(ctx, st, "u", "/")
	require.NoError(t, err)
	require.Len(t, tps, 2)
	require.Equal(t, "^b", tps[0].Write)

	require.NoError(t, p.DeleteTopicPermission(ctx, "u", "/", ""))
	tps, err = access.TopicPermissionsOf(ctx, st, "u", "/")
	require.NoError(t, err)
	require.Empty(t, tps)
	require.Empty(t, open.Topics())
}

// TestDeleteUser: deleting a missing user is not found; deleting one
// removes its permissions and topic permissions (no one else's), refuses
// its open connections every check and closes them with RabbitMQ's text.
func TestDeleteUser(t *testing.T) {
	p, st, c := plane(t)
	ctx := context.Background()
	_, err := p.PutTopicPermission(ctx, meta.TopicPermission{User: "u", VHost: "/", Exchange: "amq.topic", Write: ".*", Read: ".*"})
	require.NoError(t, err)
	g, err := access.CompileGrant(meta.Permission{Configure: ".*", Write: ".*", Read: ".*"})
	require.NoError(t, err)
	open := p.Access.Shared("u", "v", g)

	require.Equal(t, "not found", kind(p.DeleteUser(ctx, "nobody")))
	require.Empty(t, c.got, "nothing closed")
	require.NoError(t, p.DeleteUser(ctx, "u"))
	require.Equal(t, []string{"user 'u' is deleted: c1,c2"}, c.got)
	require.Nil(t, open.Grant())
	perms, err := st.ListPermissions(ctx)
	require.NoError(t, err)
	for _, perm := range perms {
		require.Equal(t, "w", perm.User, "only w's permissions are left")
	}
	require.Len(t, perms, 2)
	tps, err := st.ListTopicPermissions(ctx)
	require.NoError(t, err)
	require.Empty(t, tps)
	_, err = p.GetUser(ctx, "u")
	require.Equal(t, "not found", kind(err))
}

// TestVHosts: PutVHost refuses an unknown limit, an unknown default queue
// type and a name over 255 bytes as invalid input, creates or replaces
// the vhost and sets the limits it names; limits need an open vhost and
// a known name; the max-queues limit reaches the open vhost.
func TestVHosts(t *testing.T) {
	p, _, _ := plane(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		v       definitions.VHost
		want    string
		created bool
	}{
		{"unknown limit", definitions.VHost{Name: "n", Limits: map[string]int64{"max-channels": 1}}, "invalid", false},
		{"unknown queue type", definitions.VHost{Name: "n", DefaultQueueType: "lazy"}, "invalid", false},
		{"name too long", definitions.VHost{Name: strings.Repeat("n", 256)}, "invalid", false},
		{"new, with limits", definitions.VHost{Name: "n", DefaultQueueType: "quorum", Description: "d", Limits: map[string]int64{"max-queues": 1, "max-connections": 5}}, "ok", true},
		{"replaced", definitions.VHost{Name: "n", DefaultQueueType: "stream", Description: "e"}, "ok", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			created, err := p.PutVHost(ctx, tc.v)
			require.Equal(t, tc.want, kind(err))
			require.Equal(t, tc.created, created)
		})
	}
	require.Error(t, CheckVHost(definitions.VHost{DefaultQueueType: "lazy"}))
	v, err := p.GetVHost(ctx, "n")
	require.NoError(t, err)
	require.Equal(t, definitions.VHost{Name: "n", Description: "e", DefaultQueueType: "stream", Limits: map[string]int64{"max-queues": 1, "max-connections": 5}}, v,
		"replacing the metadata keeps the limits")
	vh, ok := p.VHosts.Lookup("n")
	require.True(t, ok)
	require.Equal(t, "stream", vh.DefaultQueueType())
	_, err = p.GetVHost(ctx, "gone")
	require.Equal(t, "not found", kind(err))
	all, err := p.ListVHosts(ctx)
	require.NoError(t, err)
	require.Len(t, all, 3)

	require.Equal(t, "not found", kind(p.PutVHostLimit(ctx, "gone", "max-queues", 1)))
	require.Error(t, p.PutVHostLimit(ctx, "n", "max-channels", 1))
	require.NoError(t, p.DeleteVHostLimit(ctx, "n", "max-connections"))
	v, err = p.GetVHost(ctx, "n")
	require.NoError(t, err)
	require.Equal(t, definitions.VHostLimits{"max-queues": 1}, v.Limits)
	n, ok := p.Limits.Get("n", limits.MaxQueues)
	require.True(t, ok)
	require.Equal(t, int64(1), n)

	require.NoError(t, p.PutVHostLimit(ctx, "n", "max-queues", 0))
	_, err = vh.DeclareQueue(ctx, "c1", &amqp.QueueDeclare{Queue: "q"})
	var ae *amqp.Error
	require.ErrorAs(t, err, &ae, "the open vhost refuses a queue beyond max-queues 0")
	require.Equal(t, uint16(amqp.PreconditionFailed), ae.Code)
	require.NoError(t, p.DeleteVHostLimit(ctx, "n", "max-queues"))
	_, err = vh.DeclareQueue(ctx, "c1", &amqp.QueueDeclare{Queue: "q"})
	require.ErrorContains(t, err, "no queue runtime", "without the limit the declare goes on to start the queue")
}

// TestDeleteVHost: deleting a vhost that is not open is not found;
// deleting one closes its connections with RabbitMQ's text, takes it off
// the open set and removes every permission, topic permission, limit and
// policy on it, no other vhost's.
func TestDeleteVHost(t *testing.T) {
	p, st, c := plane(t)
	ctx := context.Background()
	_, err := p.PutTopicPermission(ctx, meta.TopicPermission{User: "u", VHost: "v", Exchange: "amq.topic", Write: ".*", Read: ".*"})
	require.NoError(t, err)
	require.NoError(t, p.PutVHostLimit(ctx, "v", "max-queues", 3))
	_, err = p.Policies.Put(ctx, meta.Policy{VHost: "v", Name: "p", Pattern: ".*", Definition: map[string]any{"max-length": 1}}, false)
	require.NoError(t, err)
	_, err = p.Policies.Put(ctx, meta.Policy{VHost: "v", Name: "op", Pattern: ".*", Definition: map[string]any{"max-length": 1}}, true)
	require.NoError(t, err)
	open := p.Access.Shared("w", "v", nil)
	g, err := access.CompileGrant(meta.Permission{Configure: ".*", Write: ".*", Read: ".*"})
	require.NoError(t, err)
	open.Set(g)

	require.Equal(t, "not found", kind(p.DeleteVHost(ctx, "gone")))
	require.NoError(t, p.DeleteVHost(ctx, "v"))
	require.Equal(t, []string{"vhost 'v' is deleted: c2,c3"}, c.got)
	_, ok := p.VHosts.Lookup("v")
	require.False(t, ok)
	require.Nil(t, open.Grant(), "its open connections are refused every check")
	perms, err := st.ListPermissions(ctx)
	require.NoError(t, err)
	for _, perm := range perms {
		require.Equal(t, "/", perm.VHost)
	}
	require.Len(t, perms, 2, "the other vhost's stay")
	tps, err := st.ListTopicPermissions(ctx)
	require.NoError(t, err)
	require.Empty(t, tps)
	ls, err := st.ListVHostLimits(ctx)
	require.NoError(t, err)
	require.Empty(t, ls)
	for _, operator := range []bool{false, true} {
		ps, err := st.ListPolicies(ctx, "v", operator)
		require.NoError(t, err)
		require.Empty(t, ps)
	}
	_, err = st.GetVHost(ctx, "v")
	require.Equal(t, "not found", kind(err))
	require.Equal(t, "not found", kind(p.DeleteVHost(ctx, "v")), "deleted once")
}
