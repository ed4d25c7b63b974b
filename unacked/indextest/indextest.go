package indextest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/unacked"
)

// entry returns a Delivered entry with every field set from its key.
func entry(vhost, queue string, offset uint64) unacked.Entry {
	return unacked.Entry{
		Key:           unacked.Key{VHost: vhost, Queue: queue, Offset: offset},
		Connection:    fmt.Sprintf("127.0.0.1:%d -> 127.0.0.1:5672", 40000+offset%1000),
		Channel:       uint16(offset%7 + 1),
		DeliveryTag:   offset + 1,
		Broker:        "node-1",
		Incarnation:   3,
		DeliveredAt:   1_700_000_000_000_000_000 + int64(offset),
		DeliveryCount: 1,
		State:         unacked.Delivered,
	}
}

func queueEntries(t *testing.T, x unacked.Index, vhost, queue string) []unacked.Entry {
	t.Helper()
	var got []unacked.Entry
	require.NoError(t, x.Queue(context.Background(), vhost, queue, func(e unacked.Entry) bool {
		got = append(got, e)
		return true
	}))
	return got
}

func scanEntries(t *testing.T, x unacked.Index) []unacked.Entry {
	t.Helper()
	var got []unacked.Entry
	require.NoError(t, x.Scan(context.Background(), func(e unacked.Entry) bool {
		got = append(got, e)
		return true
	}))
	return got
}

// Run runs the conformance suite against indexes returned by open,
// every optional interface in unacked.Capabilities included unless opts
// say the index does not offer it (Without).
func Run(t *testing.T, open func(t *testing.T) unacked.Index, opts ...Option) {
	ctx := context.Background()
	var c config
	for _, o := range opts {
		o(&c)
	}
	t.Run("capabilities", func(t *testing.T) { testCapabilities(t, open(t), c) })
	t.Run("claimer", func(t *testing.T) { testClaimer(t, open(t)) })

	t.Run("get-missing", func(t *testing.T) {
		x := open(t)
		_, err := x.Get(ctx, unacked.Key{VHost: "/", Queue: "q", Offset: 1})
		require.ErrorIs(t, err, unacked.ErrNotFound)
		require.Empty(t, queueEntries(t, x, "/", "q"))
		require.Empty(t, scanEntries(t, x))
	})

	t.Run("round-trip", func(t *testing.T) {
		x := open(t)
		tests := []struct {
			name string
			e    unacked.Entry
		}{
			{"typical", entry("/", "jobs", 42)},
			{"zero-fields", unacked.Entry{State: unacked.Returned}},
			{"extremes", unacked.Entry{
				Key:         unacked.Key{VHost: "vh", Queue: "q", Offset: math.MaxUint64},
				Connection:  string(make([]byte, 300)),
				Channel:     math.MaxUint16,
				DeliveryTag: math.MaxUint64, Broker: "ノード",
				Incarnation: math.MaxUint64, DeliveredAt: math.MinInt64,
				DeliveryCount: math.MaxUint32, State: unacked.Delivered,
			}},
			{"negative-time", unacked.Entry{Key: unacked.Key{Queue: "neg"}, DeliveredAt: -1, State: unacked.Returned}},
			{"binary-names", unacked.Entry{
				Key:   unacked.Key{VHost: "\x00\xff", Queue: "\xff\xff\x00", Offset: 1},
				State: unacked.Delivered,
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				require.NoError(t, x.Put(ctx, []unacked.Entry{tt.e}))
				got, err := x.Get(ctx, tt.e.Key)
				require.NoError(t, err)
				require.Equal(t, tt.e, got)
			})
		}
	})

	t.Run("replace", func(t *testing.T) {
		// The in-place requeue: the same key flips from Delivered to Returned.
		x := open(t)
		e := entry("/", "q", 5)
		require.NoError(t, x.Put(ctx, []unacked.Entry{e}))
		e.State, e.Connection, e.Channel, e.DeliveryTag, e.DeliveryCount = unacked.Returned, "", 0, 0, 2
		require.NoError(t, x.Put(ctx, []unacked.Entry{e}))
		got, err := x.Get(ctx, e.Key)
		require.NoError(t, err)
		require.Equal(t, e, got)
		require.Len(t, queueEntries(t, x, "/", "q"), 1)
	})

	t.Run("delete", func(t *testing.T) {
		x := open(t)
		var batch []unacked.Entry
		for off := range uint64(10) {
			batch = append(batch, entry("/", "q", off))
		}
		require.NoError(t, x.Put(ctx, batch))
		del := []unacked.Key{batch[0].Key, batch[3].Key, batch[9].Key,
			{VHost: "/", Queue: "q", Offset: 100}, // never existed
			{VHost: "/", Queue: "other", Offset: 1},
		}
		require.NoError(t, x.Delete(ctx, del))
		require.NoError(t, x.Delete(ctx, del), "deleting twice")
		for _, k := range del {
			_, err := x.Get(ctx, k)
			require.ErrorIs(t, err, unacked.ErrNotFound)
		}
		var offsets []uint64
		for _, e := range queueEntries(t, x, "/", "q") {
			offsets = append(offsets, e.Offset)
		}
		require.Equal(t, []uint64{1, 2, 4, 5, 6, 7, 8}, offsets)
		require.NoError(t, x.Put(ctx, nil), "empty put")
		require.NoError(t, x.Delete(ctx, nil), "empty delete")
	})

	t.Run("batch-all-or-none", func(t *testing.T) {
		x := open(t)
		bad := entry("/", "q", 2)
		bad.State = 0
		batch := []unacked.Entry{entry("/", "q", 1), bad, entry("/", "q", 3)}
		require.Error(t, x.Put(ctx, batch))
		bad.State = 99
		batch[1] = bad
		require.Error(t, x.Put(ctx, batch))
		require.Empty(t, scanEntries(t, x), "a rejected batch writes nothing")
	})

	t.Run("queue-order", func(t *testing.T) {
		x := open(t)
		// Offsets whose byte order differs from little-endian or decimal
		// string order, put in random order across several batches.
		offsets := []uint64{0, 1, 9, 10, 255, 256, 257, 1 << 16, 1<<32 - 1, 1 << 32, 1 << 40, math.MaxUint64}
		shuffled := slices.Clone(offsets)
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) {
			shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
		})
		for i := 0; i < len(shuffled); i += 5 {
			var batch []unacked.Entry
			for _, off := range shuffled[i:min(i+5, len(shuffled))] {
				batch = append(batch, entry("v", "q", off))
			}
			require.NoError(t, x.Put(ctx, batch))
		}
		var got []uint64
		for _, e := range queueEntries(t, x, "v", "q") {
			require.Equal(t, entry("v", "q", e.Offset), e)
			got = append(got, e.Offset)
		}
		require.Equal(t, offsets, got)
	})

	t.Run("isolation", func(t *testing.T) {
		x := open(t)
		// Pairs whose concatenations collide, and prefixes of each other.
		queues := []struct{ vhost, queue string }{
			{"a", "bq"}, {"ab", "q"}, {"a", "b"}, {"", "abq"}, {"/", "q"}, {"/", "q2"}, {"/", "q\x00"},
		}
		for i, q := range queues {
			var batch []unacked.Entry
			for off := range uint64(i + 1) {
				batch = append(batch, entry(q.vhost, q.queue, off))
			}
			require.NoError(t, x.Put(ctx, batch))
		}
		for i, q := range queues {
			got := queueEntries(t, x, q.vhost, q.queue)
			require.Len(t, got, i+1, "%+v", q)
			for _, e := range got {
				require.Equal(t, q.vhost, e.VHost)
				require.Equal(t, q.queue, e.Queue)
			}
		}
		require.Len(t, scanEntries(t, x), 1+2+3+4+5+6+7)

		require.NoError(t, x.DeleteQueue(ctx, "a", "b"))
		require.NoError(t, x.DeleteQueue(ctx, "/", "q"))
		require.NoError(t, x.DeleteQueue(ctx, "nope", "nope"), "deleting a queue with no entries")
		for i, q := range queues {
			want := i + 1
			if i == 2 || i == 4 {
				want = 0
			}
			require.Len(t, queueEntries(t, x, q.vhost, q.queue), want, "%+v", q)
		}
		// A deleted queue takes new entries again.
		require.NoError(t, x.Put(ctx, []unacked.Entry{entry("/", "q", 7)}))
		require.Len(t, queueEntries(t, x, "/", "q"), 1)
	})

	t.Run("scan", func(t *testing.T) {
		x := open(t)
		var want []unacked.Entry
		for qi := range 5 {
			var batch []unacked.Entry
			for off := range uint64(20) {
				e := entry(fmt.Sprintf("vh%d", qi%2), fmt.Sprintf("q%d", qi), off)
				if off%3 == 0 {
					e.State = unacked.Returned
				}
				batch = append(batch, e)
			}
			require.NoError(t, x.Put(ctx, batch))
			want = append(want, batch...)
		}
		require.ElementsMatch(t, want, scanEntries(t, x))
	})

	t.Run("early-stop", func(t *testing.T) {
		x := open(t)
		var batch []unacked.Entry
		for off := range uint64(10) {
			batch = append(batch, entry("/", "q", off), entry("/", "r", off))
		}
		require.NoError(t, x.Put(ctx, batch))
		n := 0
		require.NoError(t, x.Queue(ctx, "/", "q", func(unacked.Entry) bool { n++; return n < 3 }))
		require.Equal(t, 3, n)
		n = 0
		require.NoError(t, x.Scan(ctx, func(unacked.Entry) bool { n++; return n < 4 }))
		require.Equal(t, 4, n)
	})

	t.Run("reentrant", func(t *testing.T) {
		// The queue actor requeues while it walks a queue, and the scanner's
		// caller may too: fn writing to the index must not deadlock.
		x := open(t)
		var batch []unacked.Entry
		for off := range uint64(50) {
			batch = append(batch, entry("/", "q", off))
		}
		require.NoError(t, x.Put(ctx, batch))
		require.NoError(t, x.Queue(ctx, "/", "q", func(e unacked.Entry) bool {
			e.State = unacked.Returned
			require.NoError(t, x.Put(ctx, []unacked.Entry{e}))
			return true
		}))
		require.NoError(t, x.Scan(ctx, func(e unacked.Entry) bool {
			if e.Offset%2 == 0 {
				require.NoError(t, x.Delete(ctx, []unacked.Key{e.Key}))
			}
			_, err := x.Get(ctx, e.Key)
			require.True(t, err == nil || errors.Is(err, unacked.ErrNotFound), "%v", err)
			return true
		}))
		got := queueEntries(t, x, "/", "q")
		require.Len(t, got, 25)
		for _, e := range got {
			require.Equal(t, uint64(1), e.Offset%2)
			require.Equal(t, unacked.Returned, e.State)
		}
	})

	t.Run("canceled-context", func(t *testing.T) {
		x := open(t)
		require.NoError(t, x.Put(ctx, []unacked.Entry{entry("/", "q", 1)}))
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		calls := []struct {
			name string
			call func() error
		}{
			{"Put", func() error { return x.Put(canceled, []unacked.Entry{entry("/", "q", 2)}) }},
			{"Get", func() error { _, err := x.Get(canceled, unacked.Key{VHost: "/", Queue: "q", Offset: 1}); return err }},
			{"Delete", func() error { return x.Delete(canceled, []unacked.Key{{VHost: "/", Queue: "q", Offset: 1}}) }},
			{"Queue", func() error { return x.Queue(canceled, "/", "q", func(unacked.Entry) bool { return true }) }},
			{"Scan", func() error { return x.Scan(canceled, func(unacked.Entry) bool { return true }) }},
			{"DeleteQueue", func() error { return x.DeleteQueue(canceled, "/", "q") }},
		}
		for _, c := range calls {
			t.Run(c.name, func(t *testing.T) {
				require.ErrorIs(t, c.call(), context.Canceled)
			})
		}
		got := scanEntries(t, x)
		require.Equal(t, []unacked.Entry{entry("/", "q", 1)}, got, "canceled calls change nothing")
	})

	t.Run("concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
}

// testConcurrent has one writer per queue putting, requeueing and deleting
// while readers scan. Each writer ends with a known set of entries.
func testConcurrent(t *testing.T, x unacked.Index) {
	ctx := context.Background()
	const writers, rounds, batch = 8, 50, 16
	errs := make([]error, writers+2)
	var writing, reading sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		writing.Go(func() {
			q := fmt.Sprintf("q%d", w)
			for r := range uint64(rounds) {
				var entries []unacked.Entry
				var keys []unacked.Key
				for i := range uint64(batch) {
					e := entry("/", q, r*batch+i)
					entries = append(entries, e)
					if i%2 == 0 {
						keys = append(keys, e.Key) // acked below
					}
				}
				if err := x.Put(ctx, entries); err != nil {
					errs[w] = err
					return
				}
				if err := x.Delete(ctx, keys); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	for r := range 2 {
		reading.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				var err, orderErr error
				if r == 0 {
					err = x.Scan(ctx, func(e unacked.Entry) bool { return e.State == unacked.Delivered })
				} else {
					var last uint64
					first := true
					err = x.Queue(ctx, "/", "q0", func(e unacked.Entry) bool {
						if !first && e.Offset <= last {
							orderErr = fmt.Errorf("offset %d after %d", e.Offset, last)
							return false
						}
						first, last = false, e.Offset
						return true
					})
				}
				if err = errors.Join(err, orderErr); err != nil {
					errs[writers+r] = err
					return
				}
			}
		})
	}
	writing.Wait()
	close(done)
	reading.Wait()
	require.NoError(t, errors.Join(errs...))
	for w := range writers {
		got := queueEntries(t, x, "/", fmt.Sprintf("q%d", w))
		require.Len(t, got, rounds*batch/2)
		for i, e := range got {
			require.Equal(t, uint64(2*i+1), e.Offset)
		}
	}
}
