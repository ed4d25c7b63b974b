package qgroup

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/sharedtest"
	"github.com/warrenmq/broker/meta"
)

// feedMeta is a MetaStore in memory whose change feed can be made to
// drop the record changes, to show what the Manager's full read repairs.
// It counts the full scans of the placement records.
type feedMeta struct {
	mu       sync.Mutex
	recs     map[string][]byte
	watchers []func(meta.Change)
	drop     bool
	scans    atomic.Int64
}

func (f *feedMeta) UpdateRecords(_ context.Context, u meta.RecordUpdate) (bool, error) {
	f.mu.Lock()
	for _, c := range u.Match {
		v, ok := f.recs[string(c.Key)]
		if ok != (c.Value != nil) || ok && !bytes.Equal(v, c.Value) {
			f.mu.Unlock()
			return false, nil
		}
	}
	var changes []meta.Change
	for _, s := range u.Set {
		f.recs[string(s.Key)] = bytes.Clone(s.Value)
		changes = append(changes, meta.Change{Kind: meta.ChangeRecord, Shard: string(s.Key)})
	}
	for _, k := range u.Delete {
		delete(f.recs, string(k))
	}
	ws, drop := slices.Clone(f.watchers), f.drop
	f.mu.Unlock()
	if !drop {
		for _, w := range ws {
			for _, c := range changes {
				w(c)
			}
		}
	}
	return true, nil
}

func (f *feedMeta) ScanRecords(prefix, start []byte, fn func(k, v []byte) bool) error {
	if bytes.Equal(prefix, []byte{recordPrefix, kindQueue}) {
		f.scans.Add(1)
	}
	f.mu.Lock()
	var keys []string
	for k := range f.recs {
		if bytes.HasPrefix([]byte(k), prefix) && k >= string(start) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i] = f.recs[k]
	}
	f.mu.Unlock()
	for i, k := range keys {
		if !fn([]byte(k), vals[i]) {
			break
		}
	}
	return nil
}

func (f *feedMeta) Watch(fn func(meta.Change)) func() {
	f.mu.Lock()
	f.watchers = append(f.watchers, fn)
	f.mu.Unlock()
	return func() {}
}

func (f *feedMeta) GetQueue(context.Context, string, string) (meta.Queue, error) {
	return meta.Queue{}, meta.ErrNotFound
}

func (f *feedMeta) ListPolicies(context.Context, string, bool) ([]meta.Policy, error) {
	return nil, nil
}

type noLink struct{}

func (noLink) Send(uint64, []byte) error { return nil }
func (noLink) Members() []uint64         { return nil }

// openManager opens a one-member Manager on f, its full read every
// fullEvery.
func openManager(t *testing.T, f *feedMeta, fullEvery time.Duration) *Manager {
	t.Helper()
	was := reconcileEvery
	reconcileEvery = fullEvery
	t.Cleanup(func() { reconcileEvery = was })
	st := sharedtest.New()
	m, err := Open(Config{
		Self: 1, Dir: t.TempDir(), Meta: f,
		Fallback:      Fallback{Shards: st.Shards, Index: st.Index, Cursors: st.Meta},
		Members:       func(context.Context) ([]uint64, error) { return []uint64{1}, nil },
		Link:          noLink{},
		TickInterval:  10 * time.Millisecond,
		ElectionTicks: 10,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

// place writes queue name's placement on group as another member's
// Declare does.
func place(t *testing.T, f *feedMeta, name string, group uint64) meta.QueueKey {
	t.Helper()
	k := meta.QueueKey{VHost: "/", Name: name}
	ok, err := f.UpdateRecords(context.Background(), meta.RecordUpdate{
		Set: []meta.Record{{Key: queueRecordKey(k), Value: encodePlacement(group, []uint64{1}, nil, 0)}},
	})
	require.NoError(t, err)
	require.True(t, ok)
	return k
}

func hasGroup(m *Manager, group uint64) bool {
	have, err := m.eng.Groups(context.Background())
	return err == nil && slices.Contains(have, group)
}

// TestReconcileFromFeed: a placement told by the feed is installed from
// its one record, without a full read of the records; one whose change
// was missed is installed by the full read; and a deleted record's group
// (deletions are not told) is removed by it.
func TestReconcileFromFeed(t *testing.T) {
	tests := []struct {
		name      string
		drop      bool
		fullEvery time.Duration
	}{
		{name: "told by the feed, no full read", fullEvery: time.Hour},
		{name: "missed by the feed, repaired by the full read", drop: true, fullEvery: 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &feedMeta{recs: map[string][]byte{}}
			m := openManager(t, f, tt.fullEvery)
			scans := f.scans.Load()
			f.mu.Lock()
			f.drop = tt.drop
			f.mu.Unlock()
			k := place(t, f, "q", 7)
			require.Eventually(t, func() bool {
				_, ok := m.Status(context.Background(), k)
				return ok && hasGroup(m, 7)
			}, 10*time.Second, 10*time.Millisecond)
			if !tt.drop {
				require.Equal(t, scans, f.scans.Load(), "the feed's change is applied without reading every record")
				return
			}
			_, err := f.UpdateRecords(context.Background(), meta.RecordUpdate{Delete: [][]byte{queueRecordKey(k)}})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				_, ok := m.Status(context.Background(), k)
				return !ok && !hasGroup(m, 7)
			}, 10*time.Second, 10*time.Millisecond, "the full read removes the deleted queue's group")
		})
	}
}

// TestReconcileMissedWithoutFullRead shows the full read is what repairs
// a missed change: with none due, the dropped placement stays unknown.
func TestReconcileMissedWithoutFullRead(t *testing.T) {
	f := &feedMeta{recs: map[string][]byte{}, drop: true}
	m := openManager(t, f, time.Hour)
	k := place(t, f, "q", 7)
	time.Sleep(500 * time.Millisecond)
	_, ok := m.Status(context.Background(), k)
	require.False(t, ok, "nothing told, nothing read: the placement is unknown until the full read")
}
