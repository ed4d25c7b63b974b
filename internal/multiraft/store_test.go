package multiraft

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestStoreTables checks that the tables the groups database writes are
// uncompressed and carry a bloom filter (dbOptions).
func TestStoreTables(t *testing.T) {
	fs := vfs.NewMem()
	st, err := openStore("db", fs)
	require.NoError(t, err)
	defer st.close()
	groupsWorkload(t, st, 2, 200, 512)
	require.NoError(t, st.db.Flush())
	levels, err := st.db.SSTables(pebble.WithProperties())
	require.NoError(t, err)
	n := 0
	for _, level := range levels {
		for _, tbl := range level {
			n++
			require.Equal(t, "NoCompression", tbl.Properties.CompressionName, "table %v", tbl.TableInfo)
			require.Equal(t, "rocksdb.BuiltinBloomFilter", tbl.Properties.FilterPolicyName, "table %v", tbl.TableInfo)
		}
	}
	require.NotZero(t, n, "no table was written")
}

// TestStoreOpensDefaultTables opens a directory whose tables were written
// with Pebble's default options (Snappy, no filters), as earlier builds
// wrote them, and reads everything back, then writes new tables beside
// them and reads again.
func TestStoreOpensDefaultTables(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("db", 0o750))
	old, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quietLogger{}})
	require.NoError(t, err)
	require.NoError(t, old.Set(keyFormat, []byte(formatMarker), pebble.Sync))
	st := &store{db: old}
	groupsWorkload(t, st, 1, 100, 256)
	b := st.newBatch()
	b.createGroup(99)
	require.NoError(t, b.setHardState(99, &raftpb.HardState{Term: proto.Uint64(3), Commit: proto.Uint64(7)}))
	require.NoError(t, b.append(99, []*raftpb.Entry{{Index: proto.Uint64(1), Term: proto.Uint64(3), Data: []byte("kept")}}, 0))
	require.NoError(t, b.commit())
	require.NoError(t, old.Flush())
	levels, err := old.SSTables(pebble.WithProperties())
	require.NoError(t, err)
	snappy := 0
	for _, level := range levels {
		for _, tbl := range level {
			require.Equal(t, "Snappy", tbl.Properties.CompressionName)
			snappy++
		}
	}
	require.NotZero(t, snappy, "the old options wrote no table")
	require.NoError(t, old.Close())

	for range 2 {
		st, err = openStore("db", fs)
		require.NoError(t, err)
		l, err := st.load(99)
		require.NoError(t, err)
		require.Equal(t, uint64(3), l.hs.GetTerm())
		require.Equal(t, uint64(7), l.hs.GetCommit())
		require.Equal(t, 1, len(l.ents))
		require.Equal(t, []byte("kept"), l.ents[0].GetData())
		groupsWorkload(t, st, 1, 50, 256)
		require.NoError(t, st.db.Flush())
		require.NoError(t, st.close())
	}
}

// groupsWorkload writes what a member of busy queue groups writes: for
// each of groups groups, msgs entries of size bytes appended in synced
// batches (one a group per cycle), each applied as a record that a
// later hand-off deletes (the ack), and a checkpoint dropping the log
// every SnapshotBytes of it.
func groupsWorkload(tb testing.TB, st *store, groups, msgs, size int) {
	tb.Helper()
	body := make([]byte, size) // incompressible, as most bodies are
	_, _ = rand.NewChaCha8([32]byte{1}).Read(body)
	const perCycle = 8
	logBytes := make([]int, groups+1)
	next := make([]uint64, groups+1)
	for g := range next {
		next[g] = 1
	}
	for sent := 0; sent < msgs; sent += perCycle {
		b := st.newBatch()
		for g := 1; g <= groups; g++ {
			ents := make([]*raftpb.Entry, 0, perCycle)
			for range perCycle {
				ents = append(ents, &raftpb.Entry{Index: proto.Uint64(next[g]), Term: proto.Uint64(1), Data: body})
				next[g]++
			}
			require.NoError(tb, b.setHardState(uint64(g), &raftpb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(next[g] - 1)}))
			require.NoError(tb, b.append(uint64(g), ents, 0))
			logBytes[g] += perCycle * size
		}
		require.NoError(tb, b.commit())
		for g := 1; g <= groups; g++ {
			db := st.newDataBatch(uint64(g))
			for i := next[g] - perCycle; i < next[g]; i++ {
				k := entryKey(0, i)[1:]
				require.NoError(tb, db.Set(k, body))
				if i > perCycle { // the ack of a record a cycle older
					old := entryKey(0, i-perCycle)[1:]
					_, ok, err := db.Get(old)
					require.NoError(tb, err)
					require.True(tb, ok)
					require.NoError(tb, db.Delete(old))
				}
			}
			require.NoError(tb, st.commitData(db, uint64(g), appliedRecord{index: next[g] - 1, term: 1}))
			if logBytes[g] >= 1<<20 {
				cb := st.newBatch()
				require.NoError(tb, cb.compact(uint64(g), next[g]-1))
				require.NoError(tb, cb.commitNoSync())
				logBytes[g] = 0
			}
		}
	}
}

// BenchmarkStoreWorkload runs groupsWorkload on a real directory, with
// Pebble's default options and with dbOptions, and reports, per message,
// the process's CPU and what Pebble flushed and compacted: the figures
// dbOptions is judged by, which a loaded machine does not skew the way
// it skews wall-clock time.
func BenchmarkStoreWorkload(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts func() *pebble.Options
	}{
		{"pebble-defaults", func() *pebble.Options { return &pebble.Options{Logger: quietLogger{}} }},
		{"dbOptions", func() *pebble.Options { return dbOptions(vfs.Default, false) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			db, err := pebble.Open(b.TempDir(), tc.opts())
			require.NoError(b, err)
			st := &store{db: db}
			defer st.close()
			benchWorkload(b, st)
		})
	}
}

func benchWorkload(b *testing.B, st *store) {
	const groups, size = 30, 1024
	msgs := b.N
	if msgs < 64 {
		msgs = 64
	}
	var before syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &before))
	b.ResetTimer()
	groupsWorkload(b, st, groups, msgs, size)
	b.StopTimer()
	var after syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &after))
	cpu := func(r syscall.Rusage) float64 {
		return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e3
	}
	total := float64(msgs * groups)
	m := st.db.Metrics()
	var compacted, flushed uint64
	for _, l := range m.Levels {
		compacted += l.TableBytesCompacted
		flushed += l.TableBytesFlushed
	}
	b.ReportMetric((cpu(after)-cpu(before))/total, "cpu-µs/msg")
	b.ReportMetric(float64(compacted)/total, "compacted-B/msg")
	b.ReportMetric(float64(flushed)/total, "flushed-B/msg")
	b.ReportMetric(float64(m.Flush.Count), "flushes")
	b.ReportMetric(float64(m.Compact.Count), "compactions")
}
