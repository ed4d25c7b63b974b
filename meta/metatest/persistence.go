package metatest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// RunPersistence checks that a store keeps its promise across a clean
// reopen: durable topology, accounts and cursors survive, and deletions
// stay deleted. open returns a fresh store and a reopen function; reopen
// closes whatever the store runs on and returns a new store on the same
// data. Non-durable entities are not checked: dropping them at start is the
// broker's job, not the store's.
func RunPersistence(t *testing.T, open func(t *testing.T) (s meta.Store, reopen func() meta.Store)) {
	ctx := context.Background()
	s, reopen := open(t)

	ex := meta.Exchange{VHost: "/", Name: "logs", Type: "topic", Durable: true, Arguments: []byte{0, 0, 0, 0}}
	q := meta.Queue{VHost: "/", Name: "jobs", Durable: true, Arguments: []byte{1, 2}}
	b := meta.Binding{VHost: "/", Source: "logs", Destination: "jobs", DestinationKind: meta.DestinationQueue,
		RoutingKey: "#", Durable: true}
	vh := meta.VHost{Name: "/", Description: "default", Tags: []string{"a"}, DefaultQueueType: "quorum"}
	lim := meta.VHostLimit{VHost: "/", Name: "max-queues", Value: 10}
	tp := meta.TopicPermission{User: "guest", VHost: "/", Exchange: "amq.topic", Write: "^a", Read: ".*"}
	u := meta.User{Name: "guest", PasswordHash: "hash", HashingAlgorithm: sha256, Tags: meta.UserTags{"administrator"}}
	p := meta.Permission{User: "guest", VHost: "/", Configure: ".*", Write: ".*", Read: ".*"}
	gone := meta.Queue{VHost: "/", Name: "gone", Durable: true}

	require.NoError(t, s.PutExchange(ctx, ex))
	require.NoError(t, s.PutQueue(ctx, q))
	require.NoError(t, s.PutQueue(ctx, gone))
	require.NoError(t, s.PutBinding(ctx, b))
	require.NoError(t, s.PutVHost(ctx, vh))
	require.NoError(t, s.PutVHost(ctx, meta.VHost{Name: "old"}))
	require.NoError(t, s.PutUser(ctx, u))
	require.NoError(t, s.PutPermission(ctx, p))
	require.NoError(t, s.PutVHostLimit(ctx, lim))
	require.NoError(t, s.PutVHostLimit(ctx, meta.VHostLimit{VHost: "/", Name: "max-connections", Value: 1}))
	require.NoError(t, s.DeleteVHostLimit(ctx, "/", "max-connections"))
	require.NoError(t, s.PutTopicPermission(ctx, tp))
	for _, step := range [][2]uint64{{0, 64}, {64, 128}} {
		ok, err := s.CompareAndSwapOffset(ctx, q.Key(), step[0], step[1])
		require.NoError(t, err)
		require.True(t, ok)
	}
	ok, err := s.CompareAndSwapOffset(ctx, gone.Key(), 0, 7)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.DeleteQueue(ctx, "/", "gone"))
	require.NoError(t, s.DeleteVHost(ctx, "old"))

	for round := range 2 { // reopen twice: a reopened store must reopen too
		s = reopen()

		gotEx, err := s.GetExchange(ctx, "/", "logs")
		require.NoError(t, err, "round %d", round)
		require.Equal(t, ex, gotEx)
		gotQ, err := s.GetQueue(ctx, "/", "jobs")
		require.NoError(t, err)
		require.Equal(t, q, gotQ)
		bindings, err := s.ListBindings(ctx, "/")
		require.NoError(t, err)
		require.Len(t, bindings, 1)
		require.True(t, equalBinding(b, bindings[0]), "got %+v", bindings[0])
		vhosts, err := s.ListVHosts(ctx)
		require.NoError(t, err)
		require.Equal(t, []meta.VHost{vh}, vhosts)
		gotU, err := s.GetUser(ctx, "guest")
		require.NoError(t, err)
		require.Equal(t, u, gotU)
		gotP, err := s.GetPermission(ctx, "guest", "/")
		require.NoError(t, err)
		require.Equal(t, p, gotP)
		limits, err := s.ListVHostLimits(ctx)
		require.NoError(t, err)
		require.Equal(t, []meta.VHostLimit{lim}, limits)
		topics, err := s.ListTopicPermissions(ctx)
		require.NoError(t, err)
		require.Equal(t, []meta.TopicPermission{tp}, topics)

		_, err = s.GetQueue(ctx, "/", "gone")
		require.ErrorIs(t, err, meta.ErrNotFound)
		off, err := s.Offset(ctx, gone.Key())
		require.NoError(t, err)
		require.Zero(t, off, "a deleted queue's cursor stays deleted")

		off, err = s.Offset(ctx, q.Key())
		require.NoError(t, err)
		require.Equal(t, uint64(128+round), off)
		ok, err := s.CompareAndSwapOffset(ctx, q.Key(), off, off+1)
		require.NoError(t, err)
		require.True(t, ok, "swapping from the reloaded value")
	}
}
