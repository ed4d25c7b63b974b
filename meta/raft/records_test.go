package raft_test

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// scanAll returns node i's records under prefix as key → value.
func (c *cluster) scanAll(i int, prefix string) map[string]string {
	c.tb.Helper()
	out := map[string]string{}
	require.NoError(c.tb, c.nodes[i].ScanRecords([]byte(prefix), nil, func(k, v []byte) bool {
		out[string(k)] = string(v)
		return true
	}))
	return out
}

func TestRecordsConditions(t *testing.T) {
	c := newCluster(t, 3, 0)
	ctx := testCtx(t)
	n := c.nodes[1] // a follower: its writes go through the leader
	b := func(s string) []byte { return []byte(s) }
	counter := func(v int64) string { return string(binary.BigEndian.AppendUint64(nil, uint64(v))) }

	steps := []struct {
		name    string
		u       meta.RecordUpdate
		applied bool
		want    map[string]string
	}{
		{"set", meta.RecordUpdate{Set: []meta.Record{{Key: b("ka"), Value: b("1")}}, Add: []meta.Counter{{Key: b("kn"), Delta: 2}}},
			true, map[string]string{"ka": "1", "kn": counter(2)}},
		{"absent fails", meta.RecordUpdate{Match: []meta.Record{{Key: b("ka")}}, Set: []meta.Record{{Key: b("kb"), Value: b("x")}}},
			false, map[string]string{"ka": "1", "kn": counter(2)}},
		{"match value", meta.RecordUpdate{Match: []meta.Record{{Key: b("ka"), Value: b("1")}, {Key: b("kb")}}, Set: []meta.Record{{Key: b("kb"), Value: b("2")}}},
			true, map[string]string{"ka": "1", "kb": "2", "kn": counter(2)}},
		{"wrong value", meta.RecordUpdate{Match: []meta.Record{{Key: b("ka"), Value: b("9")}}, Delete: [][]byte{b("ka")}},
			false, map[string]string{"ka": "1", "kb": "2", "kn": counter(2)}},
		{"present missing", meta.RecordUpdate{Present: [][]byte{b("kz")}, Delete: [][]byte{b("ka")}},
			false, map[string]string{"ka": "1", "kb": "2", "kn": counter(2)}},
		{"present, delete, count to zero", meta.RecordUpdate{Present: [][]byte{b("ka")}, Delete: [][]byte{b("ka")}, Add: []meta.Counter{{Key: b("kn"), Delta: -2}}},
			true, map[string]string{"kb": "2"}},
	}
	for _, s := range steps {
		ok, err := n.UpdateRecords(ctx, s.u)
		require.NoError(t, err, s.name)
		require.Equal(t, s.applied, ok, s.name)
		require.Equal(t, s.want, c.scanAll(1, "k"), s.name)
	}
	// Every replica applies the same.
	for i := range c.nodes {
		require.Eventually(t, func() bool { return len(c.scanAll(i, "k")) == 1 }, 30*time.Second, 10*time.Millisecond, "node %d", i+1)
	}
	require.Empty(t, c.scanAll(1, "z"))
	// start skips earlier keys.
	var keys []string
	require.NoError(t, n.ScanRecords(b("k"), b("kb"), func(k, _ []byte) bool { keys = append(keys, string(k)); return true }))
	require.Equal(t, []string{"kb"}, keys)
}

// TestRecordsRace: of updates racing from every node for one absent key,
// exactly one applies, and every node tells its watchers of the set.
func TestRecordsRace(t *testing.T) {
	c := newCluster(t, 3, 0)
	ctx := testCtx(t)
	var mu sync.Mutex
	told := 0
	cancel := c.nodes[2].Watch(func(ch meta.Change) {
		if ch.Kind == meta.ChangeRecord && ch.Shard == "claim" {
			mu.Lock()
			told++
			mu.Unlock()
		}
	})
	defer cancel()
	var wg sync.WaitGroup
	wins := make([]bool, 6)
	for i := range wins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := c.nodes[i%3].UpdateRecords(ctx, meta.RecordUpdate{
				Match: []meta.Record{{Key: []byte("claim")}},
				Set:   []meta.Record{{Key: []byte("claim"), Value: []byte{byte(i)}}},
			})
			require.NoError(t, err)
			wins[i] = ok
		}()
	}
	wg.Wait()
	n := 0
	for _, w := range wins {
		if w {
			n++
		}
	}
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return told == 1 }, 30*time.Second, 10*time.Millisecond)
}
