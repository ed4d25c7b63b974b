package metatest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// kind describes one entity type to the table-driven CRUD tests. Values are
// passed as any so one set of tests covers all six types.
type kind struct {
	name string
	// scoped kinds live in a vhost and are listed per vhost.
	scoped bool
	// make returns entity i of vhost (ignored when !scoped); distinct i give
	// distinct keys.
	make func(vhost string, i int) any
	// change returns v with the same key and different other fields.
	change func(v any) any
	// mutate scribbles over every slice v shares with its caller; nil when
	// the type has none.
	mutate func(v any)
	put    func(ctx context.Context, s meta.Store, v any) error
	// get fetches the entity with v's key.
	get  func(ctx context.Context, s meta.Store, v any) (any, error)
	del  func(ctx context.Context, s meta.Store, v any) error
	list func(ctx context.Context, s meta.Store, vhost string) ([]any, error)
}

func anys[T any](xs []T, err error) ([]any, error) {
	if err != nil {
		return nil, err
	}
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out, nil
}

func scribble(b []byte) {
	for i := range b {
		b[i] ^= 0xff
	}
}

var kinds = []kind{
	{
		name:   "exchange",
		scoped: true,
		make: func(vhost string, i int) any {
			return meta.Exchange{VHost: vhost, Name: fmt.Sprintf("ex.%d", i), Type: "topic", Durable: i%2 == 0,
				Internal: i%3 == 0, Arguments: []byte{0, 0, 0, 1, byte(i)}}
		},
		change: func(v any) any {
			e := v.(meta.Exchange)
			e.Type, e.AutoDelete, e.Arguments = "fanout", !e.AutoDelete, nil
			return e
		},
		mutate: func(v any) { scribble(v.(meta.Exchange).Arguments) },
		put:    func(ctx context.Context, s meta.Store, v any) error { return s.PutExchange(ctx, v.(meta.Exchange)) },
		get: func(ctx context.Context, s meta.Store, v any) (any, error) {
			e := v.(meta.Exchange)
			return s.GetExchange(ctx, e.VHost, e.Name)
		},
		del: func(ctx context.Context, s meta.Store, v any) error {
			e := v.(meta.Exchange)
			return s.DeleteExchange(ctx, e.VHost, e.Name)
		},
		list: func(ctx context.Context, s meta.Store, vhost string) ([]any, error) {
			return anys(s.ListExchanges(ctx, vhost))
		},
	},
	{
		name:   "queue",
		scoped: true,
		make: func(vhost string, i int) any {
			return meta.Queue{VHost: vhost, Name: fmt.Sprintf("q.%d", i), Durable: i%2 == 0, Exclusive: i%2 == 1,
				Owner: fmt.Sprintf("conn#%d", i), Arguments: []byte{0, 0, 0, 2, byte(i), 7}}
		},
		change: func(v any) any {
			q := v.(meta.Queue)
			q.AutoDelete, q.Owner, q.Arguments = !q.AutoDelete, "", []byte{9}
			return q
		},
		mutate: func(v any) { scribble(v.(meta.Queue).Arguments) },
		put:    func(ctx context.Context, s meta.Store, v any) error { return s.PutQueue(ctx, v.(meta.Queue)) },
		get: func(ctx context.Context, s meta.Store, v any) (any, error) {
			q := v.(meta.Queue)
			return s.GetQueue(ctx, q.VHost, q.Name)
		},
		del: func(ctx context.Context, s meta.Store, v any) error {
			q := v.(meta.Queue)
			return s.DeleteQueue(ctx, q.VHost, q.Name)
		},
		list: func(ctx context.Context, s meta.Store, vhost string) ([]any, error) {
			return anys(s.ListQueues(ctx, vhost))
		},
	},
	{
		name:   "binding",
		scoped: true,
		make: func(vhost string, i int) any {
			kind := meta.DestinationQueue
			if i%2 == 1 {
				kind = meta.DestinationExchange
			}
			return meta.Binding{VHost: vhost, Source: "amq.topic", Destination: fmt.Sprintf("d.%d", i/2),
				DestinationKind: kind, RoutingKey: "a.*.#", Arguments: []byte{byte(i)}, Durable: true}
		},
		// A binding's key is every field but Durable.
		change: func(v any) any {
			b := v.(meta.Binding)
			b.Durable = !b.Durable
			return b
		},
		mutate: func(v any) { scribble(v.(meta.Binding).Arguments) },
		put:    func(ctx context.Context, s meta.Store, v any) error { return s.PutBinding(ctx, v.(meta.Binding)) },
		get: func(ctx context.Context, s meta.Store, v any) (any, error) {
			want := v.(meta.Binding)
			all, err := s.ListBindings(ctx, want.VHost)
			if err != nil {
				return nil, err
			}
			for _, b := range all {
				b2 := b
				b2.Durable = want.Durable
				if equalBinding(b2, want) {
					return b, nil
				}
			}
			return nil, meta.ErrNotFound
		},
		del: func(ctx context.Context, s meta.Store, v any) error { return s.DeleteBinding(ctx, v.(meta.Binding)) },
		list: func(ctx context.Context, s meta.Store, vhost string) ([]any, error) {
			return anys(s.ListBindings(ctx, vhost))
		},
	},
	{
		name: "vhost",
		make: func(_ string, i int) any {
			return meta.VHost{Name: fmt.Sprintf("vh.%d", i), Description: fmt.Sprint("vhost ", i),
				Tags: []string{"prod", fmt.Sprint(i)}, DefaultQueueType: "quorum"}
		},
		change: func(v any) any {
			vh := v.(meta.VHost)
			vh.Description, vh.Tags, vh.DefaultQueueType = "", nil, ""
			return vh
		},
		mutate: func(v any) {
			for i, tags := 0, v.(meta.VHost).Tags; i < len(tags); i++ {
				tags[i] = "changed"
			}
		},
		put: func(ctx context.Context, s meta.Store, v any) error { return s.PutVHost(ctx, v.(meta.VHost)) },
		get: func(ctx context.Context, s meta.Store, v any) (any, error) {
			return s.GetVHost(ctx, v.(meta.VHost).Name)
		},
		del:  func(ctx context.Context, s meta.Store, v any) error { return s.DeleteVHost(ctx, v.(meta.VHost).Name) },
		list: func(ctx context.Context, s meta.Store, _ string) ([]any, error) { return anys(s.ListVHosts(ctx)) },
	},
	{
		name: "user",
		make: func(_ string, i int) any {
			return meta.User{Name: fmt.Sprintf("user.%d", i), PasswordHash: fmt.Sprintf("hash.%d", i),
				HashingAlgorithm: sha256, Tags: meta.UserTags{"administrator", fmt.Sprint(i)}}
		},
		change: func(v any) any {
			u := v.(meta.User)
			u.PasswordHash, u.HashingAlgorithm, u.Tags = "other", sha512, nil
			return u
		},
		mutate: func(v any) {
			u := v.(meta.User)
			for i := range u.Tags {
				u.Tags[i] = "changed"
			}
		},
		put: func(ctx context.Context, s meta.Store, v any) error { return s.PutUser(ctx, v.(meta.User)) },
		get: func(ctx context.Context, s meta.Store, v any) (any, error) {
			return s.GetUser(ctx, v.(meta.User).Name)
		},
		del:  func(ctx context.Context, s meta.Store, v any) error { return s.DeleteUser(ctx, v.(meta.User).Name) },
		list: func(ctx context.Context, s meta.Store, _ string) ([]any, error) { return anys(s.ListUsers(ctx)) },
	},
	{
		name: "permission",
		make: func(_ string, i int) any {
			return meta.Permission{User: fmt.Sprintf("user.%d", i/2), VHost: fmt.Sprintf("vh.%d", i%2),
				Configure: ".*", Write: "^amq\\.", Read: ""}
		},
		change: func(v any) any {
			p := v.(meta.Permission)
			p.Configure, p.Read = "", ".*"
			return p
		},
		put: func(ctx context.Context, s meta.Store, v any) error { return s.PutPermission(ctx, v.(meta.Permission)) },
		get: func(ctx context.Context, s meta.Store, v any) (any, error) {
			p := v.(meta.Permission)
			return s.GetPermission(ctx, p.User, p.VHost)
		},
		del: func(ctx context.Context, s meta.Store, v any) error {
			p := v.(meta.Permission)
			return s.DeletePermission(ctx, p.User, p.VHost)
		},
		list: func(ctx context.Context, s meta.Store, _ string) ([]any, error) { return anys(s.ListPermissions(ctx)) },
	},
	{
		name: "vhost-limit",
		make: func(_ string, i int) any {
			return meta.VHostLimit{VHost: fmt.Sprintf("vh.%d", i/2), Name: []string{"max-connections", "max-queues"}[i%2],
				Value: int64(i) - 1}
		},
		change: func(v any) any {
			l := v.(meta.VHostLimit)
			l.Value += 100
			return l
		},
		put: func(ctx context.Context, s meta.Store, v any) error { return s.PutVHostLimit(ctx, v.(meta.VHostLimit)) },
		get: func(ctx context.Context, s meta.Store, v any) (any, error) {
			want := v.(meta.VHostLimit)
			return find(s.ListVHostLimits(ctx))(func(l meta.VHostLimit) bool { return l.VHost == want.VHost && l.Name == want.Name })
		},
		del: func(ctx context.Context, s meta.Store, v any) error {
			l := v.(meta.VHostLimit)
			return s.DeleteVHostLimit(ctx, l.VHost, l.Name)
		},
		list: func(ctx context.Context, s meta.Store, _ string) ([]any, error) { return anys(s.ListVHostLimits(ctx)) },
	},
	{
		name: "topic-permission",
		make: func(_ string, i int) any {
			// The user and vhost names overlap as prefixes ("u", "u1"):
			// keys must keep them apart.
			return meta.TopicPermission{User: []string{"u", "u1"}[i%2], VHost: []string{"/", "/a"}[i/2%2],
				Exchange: fmt.Sprintf("x.%d", i/4), Write: "^{username}\\.", Read: ""}
		},
		change: func(v any) any {
			p := v.(meta.TopicPermission)
			p.Write, p.Read = "", ".*"
			return p
		},
		put: func(ctx context.Context, s meta.Store, v any) error {
			return s.PutTopicPermission(ctx, v.(meta.TopicPermission))
		},
		get: func(ctx context.Context, s meta.Store, v any) (any, error) {
			want := v.(meta.TopicPermission)
			return find(s.ListTopicPermissions(ctx))(func(p meta.TopicPermission) bool {
				return p.User == want.User && p.VHost == want.VHost && p.Exchange == want.Exchange
			})
		},
		del: func(ctx context.Context, s meta.Store, v any) error {
			p := v.(meta.TopicPermission)
			return s.DeleteTopicPermission(ctx, p.User, p.VHost, p.Exchange)
		},
		list: func(ctx context.Context, s meta.Store, _ string) ([]any, error) {
			return anys(s.ListTopicPermissions(ctx))
		},
	},
}

// find returns a function that picks the one listed entity match accepts,
// or meta.ErrNotFound: the Get of kinds the store only lists.
func find[T any](xs []T, err error) func(match func(T) bool) (any, error) {
	return func(match func(T) bool) (any, error) {
		if err != nil {
			return nil, err
		}
		for _, x := range xs {
			if match(x) {
				return x, nil
			}
		}
		return nil, meta.ErrNotFound
	}
}

// equalBinding compares bindings treating nil and empty Arguments alike:
// the contract stores the field table opaquely and an empty table is none.
func equalBinding(a, b meta.Binding) bool {
	if len(a.Arguments) == 0 && len(b.Arguments) == 0 {
		a.Arguments, b.Arguments = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// Run runs the conformance suite against stores returned by open: the
// entities of Store, its policies (meta.Policies), and every optional
// interface in meta.Capabilities unless opts say the store does not offer
// it (Without).
func Run(t *testing.T, open func(t *testing.T) meta.Store, opts ...Option) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	t.Run("capabilities", func(t *testing.T) { testCapabilities(t, open(t), c) })
	t.Run("policies", func(t *testing.T) { RunPolicies(t, open(t), nil) })
	t.Run("parameters", func(t *testing.T) { RunParameters(t, open(t), nil) })
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { runKind(t, k, open) })
	}
	t.Run("binding-key", func(t *testing.T) { testBindingKey(t, open(t)) })
	t.Run("validation", func(t *testing.T) { testValidation(t, open(t)) })
	t.Run("canceled-context", func(t *testing.T) { testCanceled(t, open(t)) })
	t.Run("cursor", func(t *testing.T) { testCursor(t, open(t)) })
	t.Run("cursor-concurrent", func(t *testing.T) { testCursorConcurrent(t, open(t)) })
	t.Run("cursor-concurrent-queues", func(t *testing.T) { testCursorQueues(t, open(t)) })
}

func runKind(t *testing.T, k kind, open func(t *testing.T) meta.Store) {
	ctx := context.Background()
	vhosts := []string{"/"}
	if k.scoped {
		// "a" is a prefix of "ab": a store must not list one's entities as
		// the other's.
		vhosts = []string{"/", "", "a", "ab"}
	}

	t.Run("get-missing", func(t *testing.T) {
		s := open(t)
		_, err := k.get(ctx, s, k.make("/", 0))
		require.ErrorIs(t, err, meta.ErrNotFound)
		got, err := k.list(ctx, s, "/")
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("put-get-list", func(t *testing.T) {
		s := open(t)
		want := map[string][]any{}
		for _, vh := range vhosts {
			for i := range 4 {
				v := k.make(vh, i)
				require.NoError(t, k.put(ctx, s, v))
				want[vh] = append(want[vh], v)
			}
		}
		for _, vh := range vhosts {
			for _, v := range want[vh] {
				got, err := k.get(ctx, s, v)
				require.NoError(t, err)
				require.Equal(t, v, got)
			}
			got, err := k.list(ctx, s, vh)
			require.NoError(t, err)
			if k.scoped {
				require.ElementsMatch(t, want[vh], got, "vhost %q", vh)
			} else {
				require.ElementsMatch(t, want["/"], got)
			}
		}
	})

	t.Run("put-replaces", func(t *testing.T) {
		s := open(t)
		v := k.make("a", 1)
		require.NoError(t, k.put(ctx, s, v))
		changed := k.change(v)
		require.NoError(t, k.put(ctx, s, changed))
		got, err := k.get(ctx, s, v)
		require.NoError(t, err)
		require.Equal(t, changed, got)
		all, err := k.list(ctx, s, "a")
		require.NoError(t, err)
		require.Equal(t, []any{changed}, all)
	})

	t.Run("delete", func(t *testing.T) {
		s := open(t)
		keep, gone := k.make("a", 0), k.make("a", 1)
		require.NoError(t, k.put(ctx, s, keep))
		require.NoError(t, k.put(ctx, s, gone))
		require.NoError(t, k.del(ctx, s, gone))
		_, err := k.get(ctx, s, gone)
		require.ErrorIs(t, err, meta.ErrNotFound)
		require.NoError(t, k.del(ctx, s, gone), "deleting twice")
		require.NoError(t, k.del(ctx, s, k.make("a", 99)), "deleting what never existed")
		all, err := k.list(ctx, s, "a")
		require.NoError(t, err)
		require.Equal(t, []any{keep}, all)
		if k.scoped {
			// Deleting in one vhost leaves the same name in another alone.
			other := k.make("ab", 0)
			require.NoError(t, k.put(ctx, s, other))
			require.NoError(t, k.del(ctx, s, keep))
			got, err := k.get(ctx, s, other)
			require.NoError(t, err)
			require.Equal(t, other, got)
		}
	})

	if k.mutate != nil {
		t.Run("copies", func(t *testing.T) {
			s := open(t)
			v := k.make("a", 3)
			pristine := k.make("a", 3)
			require.NoError(t, k.put(ctx, s, v))
			k.mutate(v) // the caller reuses what it passed to Put
			got, err := k.get(ctx, s, pristine)
			require.NoError(t, err)
			require.Equal(t, pristine, got)
			k.mutate(got) // the caller edits what Get returned
			all, err := k.list(ctx, s, "a")
			require.NoError(t, err)
			require.Len(t, all, 1)
			require.Equal(t, pristine, all[0])
			k.mutate(all[0]) // ... or what List returned
			got, err = k.get(ctx, s, pristine)
			require.NoError(t, err)
			require.Equal(t, pristine, got)
		})
	}
}

func testBindingKey(t *testing.T, s meta.Store) {
	ctx := context.Background()
	base := meta.Binding{VHost: "v", Source: "x", Destination: "q", DestinationKind: meta.DestinationQueue,
		RoutingKey: "k", Arguments: []byte{1}}
	// Each differs from base in one key field, so all are distinct bindings.
	variants := []func(b *meta.Binding){
		func(b *meta.Binding) {},
		func(b *meta.Binding) { b.Source = "x2" },
		func(b *meta.Binding) { b.Destination = "q2" },
		func(b *meta.Binding) { b.DestinationKind = meta.DestinationExchange },
		func(b *meta.Binding) { b.RoutingKey = "" },
		func(b *meta.Binding) { b.Arguments = nil },
		func(b *meta.Binding) { b.Arguments = []byte{1, 2} },
		// Fields whose concatenation is the same must still differ.
		func(b *meta.Binding) { b.Source, b.Destination = "xq", "" },
		func(b *meta.Binding) { b.Destination, b.RoutingKey = "qk", "" },
	}
	var want []meta.Binding
	for _, f := range variants {
		b := base
		b.Arguments = slices.Clone(base.Arguments)
		f(&b)
		require.NoError(t, s.PutBinding(ctx, b))
		want = append(want, b)
	}
	got, err := s.ListBindings(ctx, "v")
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for _, w := range want {
		require.True(t, slices.ContainsFunc(got, func(g meta.Binding) bool { return equalBinding(g, w) }),
			"binding %+v missing from %+v", w, got)
	}
	// Delete matches on the key, ignoring Durable.
	del := want[0]
	del.Durable = !del.Durable
	require.NoError(t, s.DeleteBinding(ctx, del))
	got, err = s.ListBindings(ctx, "v")
	require.NoError(t, err)
	require.Len(t, got, len(want)-1)
}

func testValidation(t *testing.T, s meta.Store) {
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
	}{
		{"binding-kind", func() error {
			return s.PutBinding(ctx, meta.Binding{VHost: "/", Source: "x", Destination: "q", DestinationKind: "table"})
		}},
		{"binding-empty-kind", func() error {
			return s.PutBinding(ctx, meta.Binding{VHost: "/", Source: "x", Destination: "q"})
		}},
		{"delete-binding-kind", func() error {
			return s.DeleteBinding(ctx, meta.Binding{VHost: "/", Source: "x", Destination: "q", DestinationKind: "?"})
		}},
		{"user-empty-name", func() error { return s.PutUser(ctx, meta.User{}) }},
		{"permission-empty-user", func() error { return s.PutPermission(ctx, meta.Permission{VHost: "/"}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Error(t, tt.call())
		})
	}
	bindings, err := s.ListBindings(ctx, "/")
	require.NoError(t, err)
	require.Empty(t, bindings, "rejected bindings must not be stored")
	users, err := s.ListUsers(ctx)
	require.NoError(t, err)
	require.Empty(t, users)
}

func testCanceled(t *testing.T, s meta.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q := meta.QueueKey{VHost: "/", Name: "q"}
	calls := []struct {
		name string
		call func() error
	}{
		{"Offset", func() error { _, err := s.Offset(ctx, q); return err }},
		{"CompareAndSwapOffset", func() error { _, err := s.CompareAndSwapOffset(ctx, q, 0, 1); return err }},
		{"PutExchange", func() error { return s.PutExchange(ctx, meta.Exchange{VHost: "/", Name: "x"}) }},
		{"GetExchange", func() error { _, err := s.GetExchange(ctx, "/", "x"); return err }},
		{"ListExchanges", func() error { _, err := s.ListExchanges(ctx, "/"); return err }},
		{"PutQueue", func() error { return s.PutQueue(ctx, meta.Queue{VHost: "/", Name: "q"}) }},
		{"DeleteQueue", func() error { return s.DeleteQueue(ctx, "/", "q") }},
		{"ListQueues", func() error { _, err := s.ListQueues(ctx, "/"); return err }},
		{"PutVHost", func() error { return s.PutVHost(ctx, meta.VHost{Name: "/"}) }},
		{"ListUsers", func() error { _, err := s.ListUsers(ctx); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, c.call(), context.Canceled)
		})
	}
	got, err := s.Offset(context.Background(), q)
	require.NoError(t, err)
	require.Zero(t, got, "a canceled swap must not apply")
}

func testCursor(t *testing.T, s meta.Store) {
	ctx := context.Background()
	q := meta.QueueKey{VHost: "a", Name: "q"}
	offset := func(q meta.QueueKey) uint64 {
		t.Helper()
		v, err := s.Offset(ctx, q)
		require.NoError(t, err)
		return v
	}
	require.Zero(t, offset(q), "a cursor that was never set reads 0")

	steps := []struct {
		old, new uint64
		swapped  bool
		after    uint64
	}{
		{0, 5, true, 5},
		{0, 7, false, 5}, // stale old value
		{6, 7, false, 5},
		{5, 5, true, 5}, // no-op swap of the current value
		{5, 1 << 63, true, 1 << 63},
		{1 << 63, 3, true, 3}, // the store does not insist on moving forward
	}
	for i, st := range steps {
		ok, err := s.CompareAndSwapOffset(ctx, q, st.old, st.new)
		require.NoError(t, err)
		require.Equal(t, st.swapped, ok, "step %d", i)
		require.Equal(t, st.after, offset(q), "step %d", i)
	}

	// Cursors are per queue and per vhost.
	for _, other := range []meta.QueueKey{{VHost: "ab", Name: "q"}, {VHost: "a", Name: "q2"}, {VHost: "", Name: "aq"}} {
		require.Zero(t, offset(other), "%+v", other)
	}

	// Redeclaring the queue keeps the cursor; deleting it drops the cursor.
	require.NoError(t, s.PutQueue(ctx, meta.Queue{VHost: "a", Name: "q", Durable: true}))
	require.Equal(t, uint64(3), offset(q))
	require.NoError(t, s.PutQueue(ctx, meta.Queue{VHost: "a", Name: "q", Durable: true}))
	require.Equal(t, uint64(3), offset(q))
	require.NoError(t, s.DeleteQueue(ctx, "a", "q"))
	require.Zero(t, offset(q))
	ok, err := s.CompareAndSwapOffset(ctx, q, 3, 4)
	require.NoError(t, err)
	require.False(t, ok, "the old cursor value must be gone")
	ok, err = s.CompareAndSwapOffset(ctx, q, 0, 4)
	require.NoError(t, err)
	require.True(t, ok)

	// DeleteQueue drops a cursor even when no queue record exists.
	orphan := meta.QueueKey{VHost: "a", Name: "orphan"}
	ok, err = s.CompareAndSwapOffset(ctx, orphan, 0, 9)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.DeleteQueue(ctx, orphan.VHost, orphan.Name))
	require.Zero(t, offset(orphan))
	require.Equal(t, uint64(4), offset(q), "deleting another queue leaves this cursor")
}

// Concurrency of the CAS test: goroutines x increments each.
const (
	casWorkers    = 16
	casIncrements = 500
)

// testCursorConcurrent races goroutines that each claim casIncrements
// offsets one at a time by read + CAS retry. Linearizable CAS means every
// value 1..N is claimed by exactly one goroutine and the cursor ends at N.
func testCursorConcurrent(t *testing.T, s meta.Store) {
	ctx := context.Background()
	q := meta.QueueKey{VHost: "/", Name: "hot"}
	claimed := make([][]uint64, casWorkers)
	errs := make([]error, casWorkers)
	var wg sync.WaitGroup
	for w := range casWorkers {
		wg.Go(func() {
			for range casIncrements {
				for {
					cur, err := s.Offset(ctx, q)
					if err != nil {
						errs[w] = err
						return
					}
					ok, err := s.CompareAndSwapOffset(ctx, q, cur, cur+1)
					if err != nil {
						errs[w] = err
						return
					}
					if ok {
						claimed[w] = append(claimed[w], cur+1)
						break
					}
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	const n = casWorkers * casIncrements
	got, err := s.Offset(ctx, q)
	require.NoError(t, err)
	require.Equal(t, uint64(n), got)
	seen := make([]bool, n+1)
	for w, vals := range claimed {
		require.Len(t, vals, casIncrements, "worker %d", w)
		for _, v := range vals {
			require.False(t, seen[v], "offset %d claimed twice", v)
			seen[v] = true
		}
	}
}

// testCursorQueues runs swaps on many queues at once, with queues being
// deleted in between, and checks each cursor ends where its own swaps left
// it.
func testCursorQueues(t *testing.T, s meta.Store) {
	ctx := context.Background()
	const queues, steps = 8, 200
	errs := make([]error, queues)
	var wg sync.WaitGroup
	for i := range queues {
		wg.Go(func() {
			q := meta.QueueKey{VHost: "/", Name: fmt.Sprintf("q%d", i)}
			for step := range uint64(steps) {
				ok, err := s.CompareAndSwapOffset(ctx, q, step, step+1)
				if err == nil && !ok {
					err = fmt.Errorf("swap %d of %v failed with no other writer", step, q)
				}
				if err != nil {
					errs[i] = err
					return
				}
			}
			// Odd queues are deleted, so their cursors go back to 0.
			if i%2 == 1 {
				errs[i] = s.DeleteQueue(ctx, q.VHost, q.Name)
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for i := range queues {
		got, err := s.Offset(ctx, meta.QueueKey{VHost: "/", Name: fmt.Sprintf("q%d", i)})
		require.NoError(t, err)
		want := uint64(steps)
		if i%2 == 1 {
			want = 0
		}
		require.Equal(t, want, got, "queue q%d", i)
	}
}

// RabbitMQ's names of two hashing algorithms (internal/passwd's), as a
// stored user reads back with its hash.
const (
	sha256 = "rabbit_password_hashing_sha256"
	sha512 = "rabbit_password_hashing_sha512"
)
