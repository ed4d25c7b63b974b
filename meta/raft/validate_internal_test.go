package raft

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/meta"
)

// TestStartRefusesOutOfRangeTerm gives a stopped member the raft state an
// unauthenticated packet left on members of earlier versions, term
// 2^64-1: Start refuses it with ErrTermOutOfRange and changes nothing,
// where raft used to panic at the member's first campaign and after every
// restart.
func TestStartRefusesOutOfRangeTerm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	net := NewNetwork()
	defer net.Close()
	dir := filepath.Join(t.TempDir(), "1")
	peers := []Peer{{ID: 1}, {ID: 2}, {ID: 3}}
	cfg := Config{ID: 1, Dir: dir, Peers: peers[:1], Transport: net.Transport(1), TickInterval: 10 * time.Millisecond}
	n, err := Start(cfg)
	require.NoError(t, err)
	require.NoError(t, n.Campaign(ctx))
	require.NoError(t, n.PutVHost(ctx, meta.VHost{Name: "v"}))
	require.NoError(t, n.Stop())

	log, err := openLogStore(filepath.Join(dir, "log"), pebbleOptions(nil))
	require.NoError(t, err)
	_, hs, _, err := log.load()
	require.NoError(t, err)
	hs.Term, hs.Vote = proto.Uint64(math.MaxUint64), proto.Uint64(0)
	require.NoError(t, log.save(hs, nil, nil, true))
	require.NoError(t, log.close())

	for range 2 { // and again: nothing was changed
		cfg.Transport = net.Transport(1)
		n, err := startRecovered(cfg)
		if n != nil {
			n.Stop()
		}
		require.ErrorIs(t, err, ErrTermOutOfRange)
		require.ErrorContains(t, err, "term 18446744073709551615")
	}
}
