package placement_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/placement"
)

// TestLeaseReportsTheHoldersStatus runs a link on member a that reports
// a counter: b reads it with a as its node and sees it advance with the
// renewals, a itself reads nothing (its own status is live), and once a
// is cut off the record goes stale and is no longer read; a release
// deletes it.
func TestLeaseReportsTheHoldersStatus(t *testing.T) {
	const ttl = 300 * time.Millisecond
	shared := &records{m: map[string][]byte{}}
	ma, mb := &member{records: shared}, &member{records: shared}
	a, b := placement.NewLease(ma, "a", ttl), placement.NewLease(mb, "b", ttl)
	var n atomic.Int64
	report := func() []byte { return []byte(`{"n":` + string(rune('0'+n.Add(1)%10)) + `}`) }
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.RunReporting(ctx, "shovel/x", report, func(hctx context.Context) error {
			close(ran)
			<-hctx.Done()
			return hctx.Err()
		})
	}()
	<-ran
	node, first, ok := b.Reported("shovel/x")
	require.True(t, ok, "the holder stored its status when it acquired the lease")
	require.Equal(t, "a", node)
	require.JSONEq(t, `{"n":1}`, string(first))
	_, _, ok = a.Reported("shovel/x")
	require.False(t, ok, "a member does not read its own record")
	require.Eventually(t, func() bool {
		_, st, ok := b.Reported("shovel/x")
		return ok && string(st) != string(first)
	}, 5*time.Second, 5*time.Millisecond, "each renewal stores the status again")

	ma.cut.Store(true) // a cannot renew: the record ages
	require.Eventually(t, func() bool { _, _, ok := b.Reported("shovel/x"); return !ok },
		5*time.Second, 5*time.Millisecond, "a record older than a TTL is not read")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	// A holder that stops releases its lease and its status record.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	require.ErrorIs(t, b.RunReporting(ctx, "shovel/y", report, func(context.Context) error { return context.Canceled }), context.Canceled)
	_, _, ok = a.Reported("shovel/y")
	require.False(t, ok)
	require.NotContains(t, shared.m, "p\x00shovel/y", "released with the lease")
}
