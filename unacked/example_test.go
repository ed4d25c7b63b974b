package unacked_test

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenmq/broker/unacked"
)

// A channel records each delivery that needs an ack, then settles
// basic.ack(tag), basic.ack(tag, multiple) and channel close.
func ExampleTable() {
	var tbl unacked.Table[unacked.Ref]
	for tag := uint64(1); tag <= 5; tag++ {
		_ = tbl.Add(tag, unacked.Ref{Key: unacked.Key{VHost: "/", Queue: "jobs", Offset: 100 + tag}, ConsumerTag: "c1"})
	}

	ref, ok := tbl.Take(2) // basic.ack delivery-tag=2
	fmt.Println("ack 2:", ref.Offset, ok)
	_, ok = tbl.Take(2) // acked twice: 406 PRECONDITION_FAILED "unknown delivery tag"
	fmt.Println("ack 2 again:", ok)

	n := tbl.TakeUpTo(3, func(tag uint64, r unacked.Ref) { // basic.ack delivery-tag=3 multiple=true
		fmt.Println("settle", tag, "offset", r.Offset)
	})
	fmt.Println("multiple ack settled", n, "left", tbl.Len())

	tbl.TakeAll(func(tag uint64, r unacked.Ref) { // channel close: requeue the rest
		fmt.Println("requeue", tag, "offset", r.Offset)
	})
	// Output:
	// ack 2: 102 true
	// ack 2 again: false
	// settle 1 offset 101
	// settle 3 offset 103
	// multiple ack settled 2 left 2
	// requeue 4 offset 104
	// requeue 5 offset 105
}

// The broker runs one Scanner; here one pass is driven by hand with a fixed
// clock, as tests do.
func ExampleScanner() {
	ctx := context.Background()
	index := unacked.NewMemoryIndex()
	now := time.Unix(1_700_000_000, 0)
	_ = index.Put(ctx, []unacked.Entry{
		{Key: unacked.Key{VHost: "/", Queue: "jobs", Offset: 1}, Connection: "gone", State: unacked.Delivered,
			DeliveredAt: now.UnixNano()},
		{Key: unacked.Key{VHost: "/", Queue: "jobs", Offset: 2}, Connection: "slow", State: unacked.Delivered,
			DeliveredAt: now.Add(-time.Hour).UnixNano()},
	})
	s, err := unacked.NewScanner(unacked.ScannerConfig{
		Index:    index,
		Now:      func() time.Time { return now },
		Orphaned: func(e unacked.Entry) bool { return e.Connection == "gone" },
		Requeue: func(ctx context.Context, entries []unacked.Entry) {
			// The broker's primitive flips each entry to Returned in place.
			for i := range entries {
				entries[i].State = unacked.Returned
			}
			_ = index.Put(ctx, entries)
			fmt.Println("requeue", len(entries), "entry, offset", entries[0].Offset)
		},
		DeliveryTimeout: 30 * time.Minute,
		TimedOut: func(_ context.Context, e unacked.Entry) {
			fmt.Println("close channel of", e.Connection, "with 406")
		},
	})
	if err != nil {
		panic(err)
	}
	_ = s.ScanOnce(ctx)
	_ = s.ScanOnce(ctx) // nothing new: offset 1 is Returned, offset 2 was reported
	// Output:
	// requeue 1 entry, offset 1
	// close channel of slow with 406
}
