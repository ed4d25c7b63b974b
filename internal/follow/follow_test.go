package follow

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// Runs of appends to one shard or moves of one cursor coalesce to their
// last change while the follower is busy; everything else is kept in
// order.
func TestFollowerCoalesces(t *testing.T) {
	f := &Follower{signal: make(chan struct{}, 1)}
	in := []meta.Change{
		{Kind: meta.ChangeAppended, Shard: "/\x00q", Offset: 1},
		{Kind: meta.ChangeAppended, Shard: "/\x00q", Offset: 3},
		{Kind: meta.ChangeAppended, Shard: "/\x00r", Offset: 1},
		{Kind: meta.ChangeCursor, VHost: "/", Queue: "q", Offset: 2},
		{Kind: meta.ChangeCursor, VHost: "/", Queue: "q", Offset: 3},
		{Kind: meta.ChangeReturned, VHost: "/", Queue: "q", Offset: 0},
		{Kind: meta.ChangeReturned, VHost: "/", Queue: "q", Offset: 1},
		{Kind: meta.ChangeTopology, VHost: "/"},
		{Kind: meta.ChangeTopology, VHost: "/"},
	}
	for _, c := range in {
		f.Add(c)
	}
	want := []meta.Change{in[1], in[2], in[4], in[5], in[6], in[7], in[8]}
	require.Equal(t, want, f.take())
	require.Len(t, f.signal, 1)
	require.Empty(t, f.take())
}
