package storagetest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// opener is the type of Run's open argument.
type opener = func(t *testing.T) (s storage.ShardStore, reopen func() storage.ShardStore)

// Run runs the conformance suite against the backend that open creates, each
// check in its own subtest.
//
// open is called whenever a check needs a store, with the t of the subtest
// that uses it, and must return a fresh, empty store. For a store that persists it also returns reopen, else
// nil. reopen closes, cleanly, the store returned last (by open or by an
// earlier reopen) and returns a new store over the same data, the way a
// broker restart would; the suite never touches the closed store again and
// may call reopen several times in one subtest. open must arrange with
// t.Cleanup to close whichever store is open when the subtest ends.
//
// When reopen is nil the checks that need it are skipped (t.Skip), so a
// non-persistent store reports them as skipped, not passed.
//
// After a reopen the suite requires: every record appended with Persistent
// set and not deleted is there, field for field; deleted records stay
// deleted; a deleted shard stays deleted; no offset is assigned twice. A
// record appended without Persistent may survive a reopen or not (RabbitMQ
// drops transient messages at restart); if it survives it must be intact.
//
// Every optional interface in storage.Capabilities is checked unless opts
// say the store does not offer it (Without): a store that lacks one it
// does not declare fails.
func Run(t *testing.T, open func(t *testing.T) (s storage.ShardStore, reopen func() storage.ShardStore), opts ...Option) {
	t.Helper()
	var c config
	for _, o := range opts {
		o(&c)
	}
	t.Run("Capabilities", func(t *testing.T) { testCapabilities(t, open, c) })
	tests := []struct {
		name string
		run  func(t *testing.T, open opener)
	}{
		{"AppendAssignsConsecutiveOffsets", testAppendOffsets},
		{"AppendIgnoresInputOffset", testAppendIgnoresInputOffset},
		{"ShardsAreIndependent", testShardsIndependent},
		{"RoundTrip", testRoundTrip},
		{"RecordsAreCopiedNotAliased", testNoStructAliasing},
		{"Read", testRead},
		{"ReadSkipsDeleted", testReadSkipsDeleted},
		{"DeleteByOffsets", testDeleteByOffsets},
		{"FirstOffset", testFirstOffset},
		{"DeleteShard", testDeleteShard},
		{"OffsetsNotReusedAfterDeleteAll", testNoReuse},
		{"LargeBatch", testLargeBatch},
		{"Reopen", testReopen},
		{"ReopenNoReuse", testReopenNoReuse},
		{"ReopenAfterDeleteShard", testReopenAfterDeleteShard},
		{"ConcurrentAppendDifferentShards", testConcurrentShards},
		{"ConcurrentAppendSameShard", testConcurrentSameShard},
		{"ConcurrentAppendDeleteRead", testConcurrentMixed},
		{"ContextDone", testContextDone},
		{"Syncer", testSyncer},
		{"Purger", testPurger},
		{"MemoryReporter", testMemoryReporter},
		{"TransientDropper", testTransientDropper},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, open) })
	}
}

// makeRecord returns a record whose every field depends on i, so a record
// read back at the wrong offset, or with one field from another record, is
// caught.
func makeRecord(i int) storage.Record {
	return storage.Record{
		Exchange:   fmt.Sprintf("ex-%d", i%7),
		RoutingKey: fmt.Sprintf("rk.%d", i),
		Properties: []byte{0x80 | byte(i%3), 0x00, byte(i), byte(i >> 8)},
		Body:       fmt.Appendf(nil, "body %d", i),
		Persistent: i%2 == 0,
		Priority:   uint8(i % 10),
		EnqueuedAt: 1_700_000_000_000_000_000 + int64(i),
		ExpiresAt:  int64(i%3) * 1_000_000,
	}
}

func makeRecords(from, n int, persistent bool) []storage.Record {
	recs := make([]storage.Record, n)
	for i := range recs {
		recs[i] = makeRecord(from + i)
		recs[i].Persistent = persistent
	}
	return recs
}

// normalize maps a zero-length Properties or Body to nil: a backend may
// return either (see the storage package comment).
func normalize(r storage.Record) storage.Record {
	if len(r.Properties) == 0 {
		r.Properties = nil
	}
	if len(r.Body) == 0 {
		r.Body = nil
	}
	return r
}

// requireRecords checks that got holds exactly want, field for field,
// offsets included.
func requireRecords(t *testing.T, want, got []storage.Record, msgAndArgs ...any) {
	t.Helper()
	require.Len(t, got, len(want), msgAndArgs...)
	for i := range want {
		require.Equal(t, normalize(want[i]), normalize(got[i]), append([]any{"record %d", i}, msgAndArgs...)...)
	}
}

func offsetsOf(recs []storage.Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Offset
	}
	return out
}

func seq(from, to uint64) []uint64 {
	out := make([]uint64, 0, to-from)
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

func mustAppend(t *testing.T, s storage.ShardStore, shard string, recs []storage.Record) uint64 {
	t.Helper()
	first, err := s.Append(context.Background(), shard, recs)
	require.NoError(t, err, "Append(%q, %d records)", shard, len(recs))
	for i := range recs {
		require.Equal(t, first+uint64(i), recs[i].Offset, "Append must set recs[%d].Offset", i)
	}
	return first
}

func mustRead(t *testing.T, s storage.ShardStore, shard string, from uint64, max int) []storage.Record {
	t.Helper()
	recs, err := s.Read(context.Background(), shard, from, max)
	require.NoError(t, err, "Read(%q, %d, %d)", shard, from, max)
	return recs
}

func mustDelete(t *testing.T, s storage.ShardStore, shard string, offsets ...uint64) {
	t.Helper()
	require.NoError(t, s.DeleteByOffsets(context.Background(), shard, offsets), "DeleteByOffsets(%q, %v)", shard, offsets)
}

// requireState checks Count, FirstOffset and the full contents of shard.
func requireState(t *testing.T, s storage.ShardStore, shard string, want []storage.Record, first uint64) {
	t.Helper()
	ctx := context.Background()
	n, err := s.Count(ctx, shard)
	require.NoError(t, err)
	require.Equal(t, uint64(len(want)), n, "Count(%q)", shard)
	fo, err := s.FirstOffset(ctx, shard)
	require.NoError(t, err)
	require.Equal(t, first, fo, "FirstOffset(%q)", shard)
	requireRecords(t, want, mustRead(t, s, shard, 0, math.MaxInt), "Read(%q) of the whole shard", shard)
}

func testAppendOffsets(t *testing.T, open opener) {
	s, _ := open(t)
	steps := []struct {
		n         int
		wantFirst uint64
	}{
		{1, 0},
		{3, 1},
		{0, 4}, // an empty batch reports the next offset and assigns none
		{5, 4},
		{1, 9},
	}
	var all []storage.Record
	for _, st := range steps {
		recs := makeRecords(len(all), st.n, false)
		require.Equal(t, st.wantFirst, mustAppend(t, s, "q", recs))
		all = append(all, recs...)
	}
	requireState(t, s, "q", all, 0)
}

func testAppendIgnoresInputOffset(t *testing.T, open opener) {
	s, _ := open(t)
	recs := makeRecords(0, 3, true)
	for i := range recs {
		recs[i].Offset = 1000 + uint64(i)*7
	}
	require.Equal(t, uint64(0), mustAppend(t, s, "q", recs))
	require.Equal(t, []uint64{0, 1, 2}, offsetsOf(mustRead(t, s, "q", 0, 10)))
}

func testShardsIndependent(t *testing.T, open opener) {
	s, _ := open(t)
	// Names that are prefixes of one another, empty, with a NUL and with
	// non-ASCII bytes: a key layout that concatenates names naively mixes
	// these up.
	shards := []string{"a", "ab", "", "a\x00", "a\x00b", "vhost/queue", "ü-ß", string([]byte{0xff, 0xfe})}
	contents := map[string][]storage.Record{}
	for round := range 3 {
		for i, sh := range shards {
			recs := makeRecords(100*i+10*round, i%3+1, round%2 == 0)
			first := mustAppend(t, s, sh, recs)
			require.Equal(t, uint64(len(contents[sh])), first, "shard %q round %d", sh, round)
			contents[sh] = append(contents[sh], recs...)
		}
	}
	for _, sh := range shards {
		requireState(t, s, sh, contents[sh], 0)
	}

	// Deleting in one shard, or deleting it, leaves the others alone.
	mustDelete(t, s, "a", 0, 1)
	require.NoError(t, s.DeleteShard(context.Background(), "ab"))
	for _, sh := range shards {
		want, first := contents[sh], uint64(0)
		switch sh {
		case "a":
			want, first = want[2:], 2
		case "ab":
			want = nil
		}
		requireState(t, s, sh, want, first)
	}
}

func testRoundTrip(t *testing.T, open opener) {
	big := bytes.Repeat([]byte{0, 1, 2, 0xfe, 0xff}, 1<<18/5+1) // 256 KiB of binary
	tests := []struct {
		name string
		rec  storage.Record
	}{
		{"Zero", storage.Record{}},
		{"EmptySlices", storage.Record{Properties: []byte{}, Body: []byte{}}},
		{"AllFields", storage.Record{
			Exchange:   "amq.topic",
			RoutingKey: "stock.usd.nyse",
			Properties: []byte{0x90, 0x00, 0x0a, 't', 'e', 'x', 't', '/', 'p', 'l', 'a', 'i', 'n', 0x02},
			Body:       []byte("hello"),
			Persistent: true,
			Priority:   9,
			EnqueuedAt: 1_722_000_000_123_456_789,
			ExpiresAt:  1_722_000_060_123_456_789,
			// ClientHeaders must come back: it says whose x-death the
			// properties carry.
			ClientHeaders: true,
		}},
		{"BinaryWithNULs", storage.Record{Exchange: "x\x00y", RoutingKey: "\x00", Properties: []byte{0, 0, 0}, Body: []byte{0, 0xff, 0}}},
		{"NonUTF8Strings", storage.Record{Exchange: string([]byte{0xc3, 0x28}), RoutingKey: string([]byte{0xff})}},
		{"LongStrings", storage.Record{Exchange: string(bytes.Repeat([]byte("e"), 255)), RoutingKey: string(bytes.Repeat([]byte("r"), 4096))}},
		{"LargeBody", storage.Record{Body: big, Persistent: true}},
		{"ExtremeValues", storage.Record{Priority: 255, EnqueuedAt: math.MaxInt64, ExpiresAt: math.MaxInt64}},
		{"NegativeTimes", storage.Record{EnqueuedAt: math.MinInt64, ExpiresAt: -1}},
		{"TransientWithBody", storage.Record{Body: []byte("transient"), Persistent: false, Priority: 1}},
	}
	s, _ := open(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.rec
			// Hand the store its own copy of the bytes, so a backend that
			// keeps references (storage/memory does) cannot make the
			// comparison below trivially true.
			in := tt.rec
			in.Properties = bytes.Clone(tt.rec.Properties)
			in.Body = bytes.Clone(tt.rec.Body)
			shard := fmt.Sprintf("rt-%d", i)
			first := mustAppend(t, s, shard, []storage.Record{in})
			want.Offset = first
			requireRecords(t, []storage.Record{want}, mustRead(t, s, shard, 0, 1))
		})
	}
}

// testNoStructAliasing checks that the store keeps its own Record values:
// a caller may reuse its recs slice after Append and edit what Read returned.
func testNoStructAliasing(t *testing.T, open opener) {
	s, _ := open(t)
	recs := makeRecords(0, 2, false)
	want := slices.Clone(recs)
	mustAppend(t, s, "q", recs)
	for i := range want {
		want[i].Offset = uint64(i)
	}
	// Reuse the slice, as a queue actor reuses its batch buffer.
	recs[0] = makeRecord(50)
	recs[1].Exchange, recs[1].Offset, recs[1].Body = "changed", 77, []byte("other")

	got := mustRead(t, s, "q", 0, 10)
	requireRecords(t, want, got)
	got[0].RoutingKey, got[0].Offset, got[0].Properties = "edited", 99, nil
	requireRecords(t, want, mustRead(t, s, "q", 0, 10), "after editing a returned Record")
}

func testRead(t *testing.T, open opener) {
	s, _ := open(t)
	all := makeRecords(0, 10, false)
	mustAppend(t, s, "q", all)
	tests := []struct {
		name string
		from uint64
		max  int
		want []uint64
	}{
		{"FirstThree", 0, 3, []uint64{0, 1, 2}},
		{"FromMiddle", 3, 4, []uint64{3, 4, 5, 6}},
		{"MaxBeyondEnd", 7, 100, []uint64{7, 8, 9}},
		{"MaxOne", 9, 1, []uint64{9}},
		{"HugeMax", 0, math.MaxInt, seq(0, 10)},
		{"AtNext", 10, 5, nil},
		{"PastNext", 1000, 5, nil},
		{"MaxUint64From", math.MaxUint64, 5, nil},
		{"MaxZero", 0, 0, nil},
		{"MaxNegative", 0, -1, nil},
		{"MaxMinInt", 0, math.MinInt, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustRead(t, s, "q", tt.from, tt.max)
			want := make([]storage.Record, len(tt.want))
			for i, o := range tt.want {
				want[i] = all[o]
			}
			requireRecords(t, want, got)
		})
	}
	t.Run("UnknownShard", func(t *testing.T) {
		require.Empty(t, mustRead(t, s, "never-appended", 0, 10))
	})
}

func testReadSkipsDeleted(t *testing.T, open opener) {
	s, _ := open(t)
	all := makeRecords(0, 10, false)
	mustAppend(t, s, "q", all)
	mustDelete(t, s, "q", 0, 2, 5, 6, 9)
	tests := []struct {
		name string
		from uint64
		max  int
		want []uint64
	}{
		{"FromStart", 0, 3, []uint64{1, 3, 4}},
		{"FromDeleted", 2, 1, []uint64{3}},
		{"AcrossGap", 4, 2, []uint64{4, 7}},
		{"All", 0, 100, []uint64{1, 3, 4, 7, 8}},
		{"FromDeletedTail", 9, 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustRead(t, s, "q", tt.from, tt.max)
			want := make([]storage.Record, len(tt.want))
			for i, o := range tt.want {
				want[i] = all[o]
			}
			requireRecords(t, want, got)
		})
	}
}

func testDeleteByOffsets(t *testing.T, open opener) {
	perm := rand.New(rand.NewPCG(1, 2)).Perm(20)
	permOffsets := make([]uint64, len(perm))
	for i, p := range perm {
		permOffsets[i] = uint64(p)
	}
	tests := []struct {
		name    string
		batches [][]uint64 // successive DeleteByOffsets calls
		keep    []uint64   // live offsets afterwards
	}{
		{"Ascending", [][]uint64{seq(0, 20)}, nil},
		{"Descending", [][]uint64{{19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}}, nil},
		{"Permutation", [][]uint64{permOffsets[:7], permOffsets[7:]}, nil},
		{"OneByOneFromTail", [][]uint64{{19}, {18}, {17}}, seq(0, 17)},
		{"Middle", [][]uint64{{10, 5, 15}}, append(append(append(seq(0, 5), seq(6, 10)...), seq(11, 15)...), seq(16, 20)...)},
		{"DuplicatesInOneCall", [][]uint64{{3, 3, 3, 4, 3}}, append(seq(0, 3), seq(5, 20)...)},
		{"TwiceInSeparateCalls", [][]uint64{{0, 1}, {1, 0}, {0}}, seq(2, 20)},
		{"NeverAssigned", [][]uint64{{20, 21, 1 << 40, math.MaxUint64}}, seq(0, 20)},
		{"MixedKnownAndUnknown", [][]uint64{{math.MaxUint64, 0, 20, 0, 19}}, seq(1, 19)},
		{"Empty", [][]uint64{{}, nil}, seq(0, 20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := open(t)
			all := makeRecords(0, 20, false)
			mustAppend(t, s, "q", all)
			for _, b := range tt.batches {
				in := slices.Clone(b)
				mustDelete(t, s, "q", in...)
				require.Equal(t, b, in, "DeleteByOffsets must not modify its argument")
			}
			want := make([]storage.Record, len(tt.keep))
			for i, o := range tt.keep {
				want[i] = all[o]
			}
			first := uint64(20)
			if len(tt.keep) > 0 {
				first = tt.keep[0]
			}
			requireState(t, s, "q", want, first)
		})
	}
	t.Run("UnknownShard", func(t *testing.T) {
		s, _ := open(t)
		mustDelete(t, s, "never-appended", 0, 1, 2)
		requireState(t, s, "never-appended", nil, 0)
		require.Equal(t, uint64(0), mustAppend(t, s, "never-appended", makeRecords(0, 1, false)))
	})
}

func testFirstOffset(t *testing.T, open opener) {
	s, _ := open(t)
	ctx := context.Background()
	steps := []struct {
		name  string
		do    func(t *testing.T)
		want  uint64 // FirstOffset afterwards
		wantN uint64 // Count afterwards
	}{
		{"NeverAppended", func(*testing.T) {}, 0, 0},
		{"AfterAppend", func(t *testing.T) { mustAppend(t, s, "q", makeRecords(0, 5, false)) }, 0, 5},
		{"DeleteMiddle", func(t *testing.T) { mustDelete(t, s, "q", 2) }, 0, 4},
		{"DeleteHead", func(t *testing.T) { mustDelete(t, s, "q", 0) }, 1, 3},
		{"DeleteNewHeadSkipsGap", func(t *testing.T) { mustDelete(t, s, "q", 1) }, 3, 2},
		{"DeleteAllReportsNext", func(t *testing.T) { mustDelete(t, s, "q", 3, 4) }, 5, 0},
		{"AppendAfterEmpty", func(t *testing.T) { mustAppend(t, s, "q", makeRecords(5, 2, false)) }, 5, 2},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do(t)
			got, err := s.FirstOffset(ctx, "q")
			require.NoError(t, err)
			require.Equal(t, st.want, got)
			n, err := s.Count(ctx, "q")
			require.NoError(t, err)
			require.Equal(t, st.wantN, n)
		})
	}
}

func testDeleteShard(t *testing.T, open opener) {
	s, _ := open(t)
	ctx := context.Background()
	mustAppend(t, s, "q", makeRecords(0, 5, true))
	mustDelete(t, s, "q", 0)
	mustAppend(t, s, "other", makeRecords(0, 2, false))

	require.NoError(t, s.DeleteShard(ctx, "q"))
	requireState(t, s, "q", nil, 0)
	require.NoError(t, s.DeleteShard(ctx, "q"), "deleting a deleted shard")
	require.NoError(t, s.DeleteShard(ctx, "never-appended"), "deleting an unknown shard")

	// The offset counter went with it: offsets start again at 0.
	recs := makeRecords(40, 3, false)
	require.Equal(t, uint64(0), mustAppend(t, s, "q", recs))
	requireState(t, s, "q", recs, 0)
	requireState(t, s, "other", makeRecordsAt(0, 2, false), 0)
}

// makeRecordsAt is makeRecords with Offset filled in as Append would, for
// records appended to an empty shard.
func makeRecordsAt(from, n int, persistent bool) []storage.Record {
	recs := makeRecords(from, n, persistent)
	for i := range recs {
		recs[i].Offset = uint64(from + i)
	}
	return recs
}

func testNoReuse(t *testing.T, open opener) {
	s, _ := open(t)
	mustAppend(t, s, "q", makeRecords(0, 5, false))
	mustDelete(t, s, "q", 4, 3, 2, 1, 0)
	requireState(t, s, "q", nil, 5)
	recs := makeRecords(5, 2, false)
	require.Equal(t, uint64(5), mustAppend(t, s, "q", recs))
	mustDelete(t, s, "q", 5, 6)
	require.Equal(t, uint64(7), mustAppend(t, s, "q", makeRecords(7, 1, false)))
}

func testLargeBatch(t *testing.T, open opener) {
	s, _ := open(t)
	const n = 2000
	all := makeRecords(0, n, true)
	mustAppend(t, s, "q", all)
	var got []storage.Record
	for from := uint64(0); ; {
		page := mustRead(t, s, "q", from, 128)
		if len(page) == 0 {
			break
		}
		require.LessOrEqual(t, len(page), 128)
		got = append(got, page...)
		from = page[len(page)-1].Offset + 1
	}
	requireRecords(t, all, got)
	// Delete every other record in one call, then the rest in another.
	var even, odd []uint64
	for i := range uint64(n) {
		if i%2 == 0 {
			even = append(even, i)
		} else {
			odd = append(odd, i)
		}
	}
	mustDelete(t, s, "q", even...)
	n2, err := s.Count(context.Background(), "q")
	require.NoError(t, err)
	require.Equal(t, uint64(n/2), n2)
	mustDelete(t, s, "q", odd...)
	requireState(t, s, "q", nil, n)
}

func needReopen(t *testing.T, open opener) (storage.ShardStore, func() storage.ShardStore) {
	t.Helper()
	s, reopen := open(t)
	if reopen == nil {
		t.Skip("storagetest: store does not persist (reopen is nil)")
	}
	return s, reopen
}

func testReopen(t *testing.T, open opener) {
	s, reopen := needReopen(t, open)
	persistent := makeRecords(0, 4, true)
	mustAppend(t, s, "q", persistent)
	transient := makeRecords(4, 3, false)
	mustAppend(t, s, "q", transient)
	late := makeRecords(7, 3, true)
	mustAppend(t, s, "q", late)
	mustDelete(t, s, "q", 1, 8)
	mustAppend(t, s, "p", makeRecords(0, 2, true))
	if sy, ok := s.(storage.Syncer); ok {
		require.NoError(t, sy.Sync(context.Background()))
	}

	for round := range 2 {
		s = reopen()
		got := mustRead(t, s, "q", 0, math.MaxInt)
		// Persistent records must be back; transient ones may be.
		var want []storage.Record
		for _, r := range append(append(slices.Clone(persistent), transient...), late...) {
			if r.Offset == 1 || r.Offset == 8 {
				continue
			}
			if !r.Persistent && !slices.Contains(offsetsOf(got), r.Offset) {
				continue
			}
			want = append(want, r)
		}
		requireRecords(t, want, got, "reopen %d", round)
		requireState(t, s, "q", want, want[0].Offset)
		requireState(t, s, "p", makeRecordsAt(0, 2, true), 0)
		// Offsets continue after the highest one ever assigned.
		next := mustAppend(t, s, "q", makeRecords(10+round, 1, true))
		require.Equal(t, uint64(10+round), next, "reopen %d: first offset after reopen", round)
		late = append(late, makeRecordsAt(10+round, 1, true)...)
	}
}

func testReopenNoReuse(t *testing.T, open opener) {
	s, reopen := needReopen(t, open)
	mustAppend(t, s, "q", makeRecords(0, 5, true))
	mustDelete(t, s, "q", 0, 1, 2, 3, 4)
	s = reopen()
	requireState(t, s, "q", nil, 5)
	require.Equal(t, uint64(5), mustAppend(t, s, "q", makeRecords(5, 1, true)))
	mustDelete(t, s, "q", 5)
	s = reopen()
	requireState(t, s, "q", nil, 6)
	require.Equal(t, uint64(6), mustAppend(t, s, "q", makeRecords(6, 1, false)))
}

func testReopenAfterDeleteShard(t *testing.T, open opener) {
	s, reopen := needReopen(t, open)
	mustAppend(t, s, "q", makeRecords(0, 3, true))
	mustAppend(t, s, "keep", makeRecords(0, 3, true))
	require.NoError(t, s.DeleteShard(context.Background(), "q"))
	s = reopen()
	requireState(t, s, "q", nil, 0)
	requireState(t, s, "keep", makeRecordsAt(0, 3, true), 0)
	require.Equal(t, uint64(0), mustAppend(t, s, "q", makeRecords(0, 1, true)))
}

// bodyFor names who appended a record in the concurrency tests.
func bodyFor(g, i, j int) []byte { return fmt.Appendf(nil, "g%d i%d j%d", g, i, j) }

func testConcurrentShards(t *testing.T, open opener) {
	s, _ := open(t)
	const goroutines, batches, size = 8, 40, 3
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			errs[g] = appendAndCheckOwnShard(s, fmt.Sprintf("shard-%d", g), g, batches, size)
		})
	}
	wg.Wait()
	for g, err := range errs {
		require.NoError(t, err, "goroutine %d", g)
	}
	for g := range goroutines {
		n, err := s.Count(context.Background(), fmt.Sprintf("shard-%d", g))
		require.NoError(t, err)
		require.Equal(t, uint64(batches*size), n)
	}
}

// appendAndCheckOwnShard runs off the test goroutine: it reports, never fails.
func appendAndCheckOwnShard(s storage.ShardStore, shard string, g, batches, size int) error {
	ctx := context.Background()
	for i := range batches {
		recs := make([]storage.Record, size)
		for j := range recs {
			recs[j] = storage.Record{RoutingKey: shard, Body: bodyFor(g, i, j), Persistent: j == 0}
		}
		first, err := s.Append(ctx, shard, recs)
		if err != nil {
			return err
		}
		if want := uint64(i * size); first != want {
			return fmt.Errorf("batch %d: first offset %d, want %d", i, first, want)
		}
		got, err := s.Read(ctx, shard, first, size)
		if err != nil {
			return err
		}
		if len(got) != size {
			return fmt.Errorf("batch %d: read back %d records, want %d", i, len(got), size)
		}
		for j, r := range got {
			if r.Offset != first+uint64(j) || !bytes.Equal(r.Body, bodyFor(g, i, j)) || r.RoutingKey != shard {
				return fmt.Errorf("batch %d: read back %d:%q from %q, want %d:%q from %q",
					i, r.Offset, r.Body, r.RoutingKey, first+uint64(j), bodyFor(g, i, j), shard)
			}
		}
	}
	return nil
}

func testConcurrentSameShard(t *testing.T, open opener) {
	s, _ := open(t)
	const goroutines, batches, size = 8, 40, 3
	firsts := make([][]uint64, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range batches {
				recs := make([]storage.Record, size)
				for j := range recs {
					recs[j] = storage.Record{Body: bodyFor(g, i, j), Persistent: i%4 == 0}
				}
				first, err := s.Append(context.Background(), "q", recs)
				if err != nil {
					errs[g] = err
					return
				}
				for j := range recs {
					if recs[j].Offset != first+uint64(j) {
						errs[g] = fmt.Errorf("batch %d: recs[%d].Offset = %d, want %d", i, j, recs[j].Offset, first+uint64(j))
						return
					}
				}
				firsts[g] = append(firsts[g], first)
			}
		})
	}
	wg.Wait()
	for g, err := range errs {
		require.NoError(t, err, "goroutine %d", g)
	}

	// Each batch got consecutive offsets, the batches of one goroutine
	// increase, and together they cover 0..total-1 exactly once.
	want := map[uint64][]byte{}
	for g := range goroutines {
		require.True(t, slices.IsSorted(firsts[g]), "goroutine %d: offsets went backwards: %v", g, firsts[g])
		for i, first := range firsts[g] {
			for j := range size {
				o := first + uint64(j)
				_, dup := want[o]
				require.False(t, dup, "offset %d assigned twice", o)
				want[o] = bodyFor(g, i, j)
			}
		}
	}
	const total = goroutines * batches * size
	got := mustRead(t, s, "q", 0, math.MaxInt)
	require.Equal(t, seq(0, total), offsetsOf(got))
	for _, r := range got {
		require.Equal(t, string(want[r.Offset]), string(r.Body), "offset %d", r.Offset)
	}
	requireCount(t, s, "q", total)
}

func requireCount(t *testing.T, s storage.ShardStore, shard string, want uint64) {
	t.Helper()
	n, err := s.Count(context.Background(), shard)
	require.NoError(t, err)
	require.Equal(t, want, n, "Count(%q)", shard)
}

// testConcurrentMixed races an appender, a deleter that acks what was
// appended (in shuffled batches, some twice), and a reader that checks what
// it sees is ordered and intact. The checks that need a quiet store run at
// the end; -race does the rest.
func testConcurrentMixed(t *testing.T, open opener) {
	s, _ := open(t)
	const batches, size = 200, 4
	ctx := context.Background()
	appended := make(chan uint64, batches)
	done := make(chan struct{})
	var appendErr, deleteErr, readErr error
	deleted := map[uint64]bool{}
	var writers, reader sync.WaitGroup

	writers.Go(func() {
		defer close(appended)
		for i := range batches {
			recs := make([]storage.Record, size)
			for j := range recs {
				recs[j] = storage.Record{Body: bodyFor(0, i, j)}
			}
			first, err := s.Append(ctx, "q", recs)
			if err != nil {
				appendErr = err
				return
			}
			appended <- first
		}
	})
	writers.Go(func() {
		rng := rand.New(rand.NewPCG(3, 4))
		for first := range appended {
			if deleteErr != nil {
				continue // keep draining so the appender never blocks
			}
			// Ack three of the four, shuffled, with one of them twice.
			offs := []uint64{first + 2, first, first + 3, first}
			rng.Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
			if err := s.DeleteByOffsets(ctx, "q", offs); err != nil {
				deleteErr = err
				continue
			}
			for _, o := range offs {
				deleted[o] = true
			}
		}
	})
	reader.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := checkSnapshot(ctx, s, "q", size); err != nil {
				readErr = err
				return
			}
		}
	})
	writers.Wait()
	close(done)
	reader.Wait()
	require.NoError(t, appendErr)
	require.NoError(t, deleteErr)
	require.NoError(t, readErr)

	var want []uint64
	for o := range uint64(batches * size) {
		if !deleted[o] {
			want = append(want, o)
		}
	}
	require.Len(t, want, batches)
	got := mustRead(t, s, "q", 0, math.MaxInt)
	require.Equal(t, want, offsetsOf(got))
	requireCount(t, s, "q", batches)
	fo, err := s.FirstOffset(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, want[0], fo)
}

// checkSnapshot reads the whole shard and checks order and contents; it runs
// off the test goroutine.
func checkSnapshot(ctx context.Context, s storage.ShardStore, shard string, size int) error {
	if _, err := s.Count(ctx, shard); err != nil {
		return err
	}
	first, err := s.FirstOffset(ctx, shard)
	if err != nil {
		return err
	}
	recs, err := s.Read(ctx, shard, first, 64)
	if err != nil {
		return err
	}
	for k, r := range recs {
		if k > 0 && r.Offset <= recs[k-1].Offset {
			return fmt.Errorf("read offsets out of order: %d after %d", r.Offset, recs[k-1].Offset)
		}
		if r.Offset < first {
			return fmt.Errorf("read offset %d below from %d", r.Offset, first)
		}
		i, j := int(r.Offset)/size, int(r.Offset)%size
		if want := bodyFor(0, i, j); !bytes.Equal(r.Body, want) {
			return fmt.Errorf("offset %d: body %q, want %q", r.Offset, r.Body, want)
		}
	}
	return nil
}

func testContextDone(t *testing.T, open opener) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	contexts := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"Canceled", canceled, context.Canceled},
		{"DeadlineExceeded", expired, context.DeadlineExceeded},
	}
	for _, c := range contexts {
		t.Run(c.name, func(t *testing.T) {
			s, _ := open(t)
			all := makeRecords(0, 3, true)
			mustAppend(t, s, "q", all)
			ops := []struct {
				name string
				call func(ctx context.Context) error
			}{
				{"Append", func(ctx context.Context) error {
					_, err := s.Append(ctx, "q", makeRecords(3, 2, true))
					return err
				}},
				{"Read", func(ctx context.Context) error { _, err := s.Read(ctx, "q", 0, 10); return err }},
				{"DeleteByOffsets", func(ctx context.Context) error { return s.DeleteByOffsets(ctx, "q", []uint64{0, 1}) }},
				{"FirstOffset", func(ctx context.Context) error { _, err := s.FirstOffset(ctx, "q"); return err }},
				{"Count", func(ctx context.Context) error { _, err := s.Count(ctx, "q"); return err }},
				{"DeleteShard", func(ctx context.Context) error { return s.DeleteShard(ctx, "q") }},
			}
			for _, op := range ops {
				require.ErrorIs(t, op.call(c.ctx), c.want, op.name)
			}
			// Nothing was written.
			requireState(t, s, "q", all, 0)
			require.Equal(t, uint64(3), mustAppend(t, s, "q", makeRecords(3, 1, false)))
		})
	}
}

func testSyncer(t *testing.T, open opener) {
	s, _ := open(t)
	sy, ok := s.(storage.Syncer)
	if !ok {
		t.Skip("storagetest: store does not implement storage.Syncer")
	}
	ctx := context.Background()
	require.NoError(t, sy.Sync(ctx), "Sync of an empty store")
	mustAppend(t, s, "q", makeRecords(0, 2, false))
	require.NoError(t, sy.Sync(ctx))
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, sy.Sync(canceled), context.Canceled)
}

// testPurger checks storage.Purger on a short and a long shard (a backend
// may delete them differently), with deleted offsets and live records
// below from, and across a reopen.
func testPurger(t *testing.T, open opener) {
	ctx := context.Background()
	tests := []struct {
		name    string
		records int
		deleted []uint64 // before the purge
		from    uint64
	}{
		{"Short", 10, []uint64{2, 7}, 5},
		{"Long", 3000, []uint64{0, 1500, 2999}, 1000},
		{"FromZero", 600, []uint64{3}, 0},
		{"AllBelow", 20, nil, 20},
		{"FromPastNext", 20, []uint64{19}, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, reopen := open(t)
			p, ok := s.(storage.Purger)
			if !ok {
				t.Skip("storagetest: store does not implement storage.Purger")
			}
			all := makeRecords(0, tt.records, true)
			for i := range all {
				all[i].Persistent = i%3 != 0
			}
			mustAppend(t, s, "q", all)
			mustAppend(t, s, "other", makeRecords(0, 3, true))
			mustDelete(t, s, "q", tt.deleted...)
			var keep []storage.Record
			wantN, wantEnd := uint64(0), tt.from
			for _, r := range all {
				switch {
				case slices.Contains(tt.deleted, r.Offset):
				case r.Offset < tt.from:
					keep = append(keep, r)
				default:
					wantN, wantEnd = wantN+1, r.Offset+1
				}
			}
			n, end, err := p.PurgeFrom(ctx, "q", tt.from)
			require.NoError(t, err)
			require.Equal(t, wantN, n, "records purged")
			require.Equal(t, wantEnd, end, "one past the last purged")
			first := uint64(tt.records)
			if len(keep) > 0 {
				first = keep[0].Offset
			}
			requireState(t, s, "q", keep, first)
			requireState(t, s, "other", makeRecordsAt(0, 3, true), 0)

			// Again: nothing is left to purge.
			n, end, err = p.PurgeFrom(ctx, "q", tt.from)
			require.NoError(t, err)
			require.Equal(t, [2]uint64{0, tt.from}, [2]uint64{n, end}, "second purge")
			// Offsets go on after the purged ones.
			require.Equal(t, uint64(tt.records), mustAppend(t, s, "q", makeRecords(tt.records, 1, true)))
			keep = append(keep, makeRecordsAt(tt.records, 1, true)...)
			requireState(t, s, "q", keep, keep[0].Offset)

			if reopen == nil {
				return
			}
			if sy, ok := s.(storage.Syncer); ok {
				require.NoError(t, sy.Sync(ctx))
			}
			s = reopen()
			requireState(t, s, "q", keep, keep[0].Offset)
			require.Equal(t, uint64(tt.records+1), mustAppend(t, s, "q", makeRecords(tt.records+1, 1, true)))
		})
	}
	t.Run("UnknownShard", func(t *testing.T) {
		s, _ := open(t)
		p, ok := s.(storage.Purger)
		if !ok {
			t.Skip("storagetest: store does not implement storage.Purger")
		}
		n, end, err := p.PurgeFrom(ctx, "nope", 7)
		require.NoError(t, err)
		require.Equal(t, [2]uint64{0, 7}, [2]uint64{n, end})
	})
	t.Run("ContextDone", func(t *testing.T) {
		s, _ := open(t)
		p, ok := s.(storage.Purger)
		if !ok {
			t.Skip("storagetest: store does not implement storage.Purger")
		}
		all := makeRecords(0, 3, true)
		mustAppend(t, s, "q", all)
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		_, _, err := p.PurgeFrom(canceled, "q", 0)
		require.ErrorIs(t, err, context.Canceled)
		requireState(t, s, "q", all, 0)
	})
}
