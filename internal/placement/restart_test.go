package placement_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/placement"
)

// TestLeaseRestartsTheLinkFromAnyMember runs a link on member a and
// restarts it through b (which does not hold it) and through a: each
// Restart returns once the link stopped and started again on a, under
// the same lease (b never runs it, it never runs twice at once), and a
// link nobody holds is not restarted.
func TestLeaseRestartsTheLinkFromAnyMember(t *testing.T) {
	const ttl = 600 * time.Millisecond
	shared := &records{m: map[string][]byte{}}
	ma, mb := &member{records: shared}, &member{records: shared}
	a, b := placement.NewLease(ma, "a", ttl), placement.NewLease(mb, "b", ttl)
	var starts, now, twice atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	link := func(hctx context.Context) error {
		starts.Add(1)
		if now.Add(1) > 1 {
			twice.Store(1)
		}
		<-hctx.Done()
		now.Add(-1)
		return hctx.Err()
	}
	done := make(chan error, 1)
	go func() { done <- a.RunReporting(ctx, "shovel/x", func() []byte { return []byte(`{}`) }, link) }()
	require.Eventually(t, func() bool { return starts.Load() == 1 }, 5*time.Second, time.Millisecond)

	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	for i, via := range []*placement.Lease{b, a, b} {
		ran, err := via.Restart(rctx, "shovel/x")
		require.NoError(t, err)
		require.True(t, ran)
		// The holder stopped the link before it answered, and started
		// it again on a goroutine of its own.
		require.Eventually(t, func() bool { return starts.Load() == int32(i+2) }, time.Second, time.Millisecond,
			"restart %d", i+1)
		require.Equal(t, "a", b.Holder("shovel/x"), "restarted on the member that holds it")
	}
	require.Zero(t, twice.Load(), "the link ran twice at once")

	ran, err := b.Restart(rctx, "shovel/nobody")
	require.NoError(t, err)
	require.False(t, ran, "a link nobody holds")

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NotContains(t, shared.m, "p\x01shovel/x", "the request record goes with the lease")
}
