package sharedtest

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

func TestChangesAndClaims(t *testing.T) {
	ctx := context.Background()
	s := New()
	var mu sync.Mutex
	var got []meta.Change
	cancel := s.Watch(func(c meta.Change) { mu.Lock(); got = append(got, c); mu.Unlock() })

	_, err := s.Shards.Append(ctx, "v\x00q", []storage.Record{{Body: []byte("a")}, {Body: []byte("b")}})
	require.NoError(t, err)
	k0 := unacked.Key{VHost: "v", Queue: "q", Offset: 0}
	k1 := unacked.Key{VHost: "v", Queue: "q", Offset: 1}

	ok, err := s.Index.Claim(ctx, unacked.Claim{VHost: "v", Queue: "q", Move: true, From: 1, To: 2})
	require.NoError(t, err)
	require.False(t, ok, "the cursor is at 0, not 1")

	ok, err = s.Index.Claim(ctx, unacked.Claim{VHost: "v", Queue: "q", Move: true, From: 0, To: 2,
		Entries: []unacked.Entry{{Key: k0, Broker: "a", State: unacked.Delivered}, {Key: k1, Broker: "a", State: unacked.Delivered}}})
	require.NoError(t, err)
	require.True(t, ok)

	ok, err = s.Index.Claim(ctx, unacked.Claim{VHost: "v", Queue: "q", Taken: []unacked.Key{k0},
		Entries: []unacked.Entry{{Key: k0, Broker: "b", State: unacked.Delivered}}})
	require.NoError(t, err)
	require.False(t, ok, "k0 is delivered, not returned")

	require.NoError(t, s.Index.Put(ctx, []unacked.Entry{{Key: k0, Broker: "a", State: unacked.Returned, DeliveryCount: 1}}))
	ok, err = s.Index.Claim(ctx, unacked.Claim{VHost: "v", Queue: "q", Taken: []unacked.Key{k0},
		Entries: []unacked.Entry{{Key: k0, Broker: "b", State: unacked.Delivered, DeliveryCount: 2}}})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Meta.PutExchange(ctx, meta.Exchange{VHost: "v", Name: "x", Type: "direct"}))

	cancel()
	require.NoError(t, s.Meta.PutExchange(ctx, meta.Exchange{VHost: "v", Name: "y", Type: "direct"}))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []meta.Change{
		{Kind: meta.ChangeAppended, Shard: "v\x00q", Offset: 2},
		{Kind: meta.ChangeCursor, VHost: "v", Queue: "q", Offset: 2},
		{Kind: meta.ChangeReturned, VHost: "v", Queue: "q", Offset: 0, DeliveryCount: 1},
		{Kind: meta.ChangeTaken, VHost: "v", Queue: "q", Offset: 0},
		{Kind: meta.ChangeTopology, VHost: "v"},
	}, got)
}
