package placement_test

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/placement"
	"github.com/warrenmq/broker/meta"
)

// records is meta.Records over a map, shared by the members of a test;
// a member's view (member) can be cut off, when its updates fail as a
// partitioned raft member's do.
type records struct {
	mu sync.Mutex
	m  map[string][]byte
}

type member struct {
	*records
	cut atomic.Bool
}

var errCut = errors.New("cut off")

func (r *member) UpdateRecords(ctx context.Context, u meta.RecordUpdate) (bool, error) {
	if r.cut.Load() {
		<-ctx.Done() // as a write to a group with no leader waits
		return false, errCut
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range u.Present {
		if _, ok := r.m[string(k)]; !ok {
			return false, nil
		}
	}
	for _, c := range u.Match {
		v, ok := r.m[string(c.Key)]
		if (c.Value == nil) == ok || (ok && !bytes.Equal(v, c.Value)) {
			return false, nil
		}
	}
	for _, s := range u.Set {
		r.m[string(s.Key)] = bytes.Clone(s.Value)
	}
	for _, k := range u.Delete {
		delete(r.m, string(k))
	}
	return true, nil
}

func (r *member) ScanRecords(prefix, start []byte, fn func(k, v []byte) bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var keys []string
	for k := range r.m {
		if bytes.HasPrefix([]byte(k), prefix) && k >= string(start) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !fn([]byte(k), r.m[k]) {
			break
		}
	}
	return nil
}

// running counts who runs the link, and fails the test if two do.
type running struct {
	t     *testing.T
	n     atomic.Int32
	who   atomic.Value
	twice atomic.Bool
}

func (r *running) link(name string) func(context.Context) error {
	return func(ctx context.Context) error {
		if r.n.Add(1) > 1 {
			r.twice.Store(true)
		}
		r.who.Store(name)
		<-ctx.Done()
		r.n.Add(-1)
		return ctx.Err()
	}
}

func (r *running) waitRunning(t *testing.T, within time.Duration, not string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if r.n.Load() == 1 {
			if w, _ := r.who.Load().(string); w != not {
				return w
			}
		}
		require.True(t, time.Now().Before(deadline), "nobody (else than %q) runs the link", not)
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLeaseRunsALinkOnOneMemberAndMovesIt(t *testing.T) {
	const ttl = 300 * time.Millisecond
	shared := &records{m: map[string][]byte{}}
	members := map[string]*member{}
	cancels := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	var r running
	for _, name := range []string{"a", "b", "c"} {
		m := &member{records: shared}
		members[name] = m
		l := placement.NewLease(m, name, ttl)
		ctx, cancel := context.WithCancel(context.Background())
		cancels[name] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.ErrorIs(t, l.Run(ctx, "shovel/x", r.link(name)), context.Canceled)
		}()
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
		wg.Wait()
	}()

	first := r.waitRunning(t, ttl, "")
	require.Equal(t, first, placement.NewLease(members[first], "q", ttl).Holder("shovel/x"))

	// The holder is cut off: it stops its link, and another member runs it
	// only after a TTL, never at the same time.
	members[first].cut.Store(true)
	cutAt := time.Now()
	second := r.waitRunning(t, 3*ttl, first)
	require.GreaterOrEqual(t, time.Since(cutAt), ttl/2, "taken over before the old holder could have stopped")
	require.False(t, r.twice.Load(), "the link ran on two members at once")

	// The holder stops cleanly: it releases, and a third member takes
	// over without waiting a TTL.
	cancels[second]()
	stoppedAt := time.Now()
	third := r.waitRunning(t, ttl, second)
	require.NotEqual(t, first, third)
	require.Less(t, time.Since(stoppedAt), ttl, "a released lease is taken at the next poll")
	require.False(t, r.twice.Load(), "the link ran on two members at once")
}

func TestLeaseRunReturnsWhenTheLinkFinishes(t *testing.T) {
	m := &member{records: &records{m: map[string][]byte{}}}
	l := placement.NewLease(m, "a", 300*time.Millisecond)
	done := errors.New("done")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.ErrorIs(t, l.Run(ctx, "shovel/x", func(context.Context) error { return done }), done)
	require.Empty(t, l.Holder("shovel/x"), "released when the link finished")
}
