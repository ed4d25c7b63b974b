package storagetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/capability"
	"github.com/warrenmq/broker/storage"
)

// Option changes what Run checks.
type Option func(*config)

type config struct{ without []string }

// Without says the store does not offer the named optional interfaces
// (names from storage.Capabilities, such as "storage.Purger"). Run
// checks every capability by default: a store that lacks one not named
// here fails, and so does one that implements a capability named here,
// so the list says exactly what the store offers.
func Without(names ...string) Option {
	return func(c *config) { c.without = append(c.without, names...) }
}

// testCapabilities checks the store's optional interfaces against what
// the test declared (each one it offers has its own subtests).
func testCapabilities(t *testing.T, open opener, c config) {
	s, _ := open(t)
	for _, p := range capability.Declared(storage.Capabilities, s, c.without, "storagetest", "storage.Wrap") {
		t.Errorf("storagetest: %s", p)
	}
}

// testMemoryReporter checks that MemoryBytes counts the Properties and
// Body bytes of the live records the store holds in memory: it grows by
// at most what was appended and comes back to where it was once every
// record is deleted.
func testMemoryReporter(t *testing.T, open opener) {
	s, _ := open(t)
	mr, ok := s.(storage.MemoryReporter)
	if !ok {
		t.Skip("storagetest: store does not implement storage.MemoryReporter")
	}
	before := mr.MemoryBytes()
	recs := makeRecords(0, 10, false)
	var size int64
	for _, r := range recs {
		size += int64(len(r.Properties) + len(r.Body))
	}
	first := mustAppend(t, s, "q", recs)
	grown := mr.MemoryBytes() - before
	require.GreaterOrEqual(t, grown, int64(0))
	require.LessOrEqual(t, grown, size, "MemoryBytes counts Properties and Body, nothing more")
	mustDelete(t, s, "q", seq(first, first+uint64(len(recs)))...)
	require.Equal(t, before, mr.MemoryBytes(), "deleted records no longer count")
}

// testTransientDropper checks DropTransient: it deletes exactly the
// shard's non-persistent records, reports how many, and leaves other
// shards and the offsets alone.
func testTransientDropper(t *testing.T, open opener) {
	s, _ := open(t)
	d, ok := s.(storage.TransientDropper)
	if !ok {
		t.Skip("storagetest: store does not implement storage.TransientDropper")
	}
	ctx := context.Background()
	all := makeRecords(0, 9, true)
	for i := range all {
		all[i].Persistent = i%3 != 0
	}
	mustAppend(t, s, "q", all)
	mustAppend(t, s, "other", makeRecords(0, 3, false))
	n, err := d.DropTransient(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, 3, n)
	var keep []storage.Record
	for _, r := range all {
		if r.Persistent {
			keep = append(keep, r)
		}
	}
	requireState(t, s, "q", keep, keep[0].Offset)
	require.Equal(t, uint64(3), requireCountOf(t, s, "other"))
	require.Equal(t, uint64(9), mustAppend(t, s, "q", makeRecords(9, 1, true)), "offsets go on")
	n, err = d.DropTransient(ctx, "nope")
	require.NoError(t, err)
	require.Zero(t, n)
}

func requireCountOf(t *testing.T, s storage.ShardStore, shard string) uint64 {
	t.Helper()
	n, err := s.Count(context.Background(), shard)
	require.NoError(t, err)
	return n
}
