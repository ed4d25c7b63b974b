package storagetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/warrenmq/broker/storage"
)

// benchProperties is a typical content header property list: flags with
// content-type and delivery-mode set, "application/json", mode 2.
var benchProperties = []byte{0x90, 0x00, 0x10, 'a', 'p', 'p', 'l', 'i', 'c', 'a', 't', 'i', 'o', 'n', '/', 'j', 's', 'o', 'n', 0x02}

// benchBodySize is a small message: the case where per-record overhead, not
// copying bytes, decides the speed.
const benchBodySize = 128

// refillEvery bounds how many records a benchmark lets pile up before it
// stops the timer and starts a fresh shard, so a long run does not turn into
// a memory or compaction benchmark.
const refillEvery = 1 << 16

// Benchmark runs the standard ShardStore benchmarks against the store open
// returns; open is called once per sub-benchmark and must arrange its own
// cleanup with b.Cleanup. Sub-benchmarks, each at batch=1 and batch=64:
//
//	Append/transient   Append of small non-persistent records
//	Append/persistent  the same with Persistent set (a durable store syncs)
//	Read               Read of batch records from a moving offset
//	DeleteByOffsets    deleting batch existing records, ascending
//
// Every sub-benchmark reports allocations and bytes (properties plus body)
// per operation.
func Benchmark(b *testing.B, open func(b *testing.B) storage.ShardStore) {
	b.Helper()
	for _, persistent := range []bool{false, true} {
		mode := "transient"
		if persistent {
			mode = "persistent"
		}
		for _, n := range []int{1, 64} {
			b.Run(fmt.Sprintf("Append/%s/batch=%d", mode, n), func(b *testing.B) {
				benchAppend(b, open(b), n, persistent)
			})
		}
	}
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("Read/batch=%d", n), func(b *testing.B) {
			benchRead(b, open(b), n)
		})
	}
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("DeleteByOffsets/batch=%d", n), func(b *testing.B) {
			benchDelete(b, open(b), n)
		})
	}
}

func benchRecords(n int, persistent bool) []storage.Record {
	body := make([]byte, benchBodySize)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	recs := make([]storage.Record, n)
	for i := range recs {
		// Every record shares the same bytes: a store may keep references
		// (storage/memory does), and nothing modifies them.
		recs[i] = storage.Record{
			Exchange:   "amq.direct",
			RoutingKey: "bench",
			Properties: benchProperties,
			Body:       body,
			Persistent: persistent,
			EnqueuedAt: 1_722_000_000_000_000_000,
		}
	}
	return recs
}

func recordBytes(n int) int64 { return int64(n * (len(benchProperties) + benchBodySize)) }

func benchAppend(b *testing.B, s storage.ShardStore, n int, persistent bool) {
	ctx := context.Background()
	recs := benchRecords(n, persistent)
	b.ReportAllocs()
	b.SetBytes(recordBytes(n))
	stored := 0
	for b.Loop() {
		if stored >= refillEvery {
			b.StopTimer()
			if err := s.DeleteShard(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
			stored = 0
			b.StartTimer()
		}
		if _, err := s.Append(ctx, "bench", recs); err != nil {
			b.Fatal(err)
		}
		stored += n
	}
}

func benchRead(b *testing.B, s storage.ShardStore, n int) {
	ctx := context.Background()
	const stored = 4096
	recs := benchRecords(64, false)
	for i := 0; i < stored; i += len(recs) {
		if _, err := s.Append(ctx, "bench", recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(recordBytes(n))
	from := uint64(0)
	for b.Loop() {
		got, err := s.Read(ctx, "bench", from, n)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != n {
			b.Fatalf("Read(%d, %d) returned %d records", from, n, len(got))
		}
		from += uint64(n)
		if from+uint64(n) > stored {
			from = 0
		}
	}
}

func benchDelete(b *testing.B, s storage.ShardStore, n int) {
	ctx := context.Background()
	recs := benchRecords(64, false)
	offsets := make([]uint64, n)
	var next, end uint64 // offsets [next, end) exist
	b.ReportAllocs()
	b.SetBytes(recordBytes(n))
	for b.Loop() {
		if next+uint64(n) > end {
			b.StopTimer()
			for range refillEvery / len(recs) {
				first, err := s.Append(ctx, "bench", recs)
				if err != nil {
					b.Fatal(err)
				}
				end = first + uint64(len(recs))
			}
			next = end - refillEvery
			b.StartTimer()
		}
		for i := range offsets {
			offsets[i] = next + uint64(i)
		}
		if err := s.DeleteByOffsets(ctx, "bench", offsets); err != nil {
			b.Fatal(err)
		}
		next += uint64(n)
	}
}
