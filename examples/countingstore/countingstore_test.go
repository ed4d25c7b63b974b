package countingstore_test

import (
	"context"
	"fmt"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/examples/countingstore"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/storage/pebble"
	"github.com/warrenmq/broker/storage/storagetest"
)

// TestConformanceMemory runs the suite over a wrapped in-memory store: no
// reopen, so the restart checks are skipped, and no Syncer.
func TestConformanceMemory(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) (storage.ShardStore, func() storage.ShardStore) {
		s, _ := countingstore.Wrap(memory.New())
		return s, nil
	}, storagetest.Without("storage.Syncer", "storage.TransientDropper", "storage.Purger"))
}

// TestConformancePebble runs the whole suite, restarts and Sync included,
// over a wrapped Pebble store.
func TestConformancePebble(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) (storage.ShardStore, func() storage.ShardStore) {
		dir := t.TempDir()
		db, err := pebble.Open(dir)
		require.NoError(t, err)
		t.Cleanup(func() {
			if db != nil {
				require.NoError(t, db.Close())
			}
		})
		s, _ := countingstore.Wrap(pebble.New(db))
		reopen := func() storage.ShardStore {
			require.NoError(t, db.Close())
			db = nil
			db, err = pebble.Open(dir)
			require.NoError(t, err)
			s, _ := countingstore.Wrap(pebble.New(db))
			return s
		}
		return s, reopen
	}, storagetest.Without("storage.MemoryReporter"))
}

func TestWrapKeepsSyncerOptional(t *testing.T) {
	mem, _ := countingstore.Wrap(memory.New())
	_, ok := mem.(storage.Syncer)
	require.False(t, ok, "memory cannot sync, so neither can its wrapper")

	db, err := pebble.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	peb, counts := countingstore.Wrap(pebble.New(db))
	sy, ok := peb.(storage.Syncer)
	require.True(t, ok)
	require.NoError(t, sy.Sync(context.Background()))
	require.Equal(t, uint64(1), counts.Syncs.Load())

	// Every optional interface, not only Syncer: the wrapper lacks what
	// its inner store lacks, nothing more.
	require.Equal(t, storage.Lacks(memory.New()), storage.Lacks(mem))
	require.Equal(t, storage.Lacks(pebble.New(db)), storage.Lacks(peb))
}

func TestCountsErrors(t *testing.T) {
	s, counts := countingstore.Wrap(memory.New())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Append(ctx, "q", []storage.Record{{Body: []byte("x")}})
	require.Error(t, err)
	require.Equal(t, uint64(1), counts.Appends.Load())
	require.Equal(t, uint64(0), counts.AppendedRecords.Load())
	require.Equal(t, uint64(1), counts.Errors.Load())
}

// Example plugs the counting store into a broker: durable queues keep
// their messages in Options.Storage.Shards.
func Example() {
	shards, counts := countingstore.Wrap(memory.New())
	b, err := broker.New(broker.Options{Storage: broker.StorageOptions{Shards: shards}})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	ctx := context.Background()
	ch, err := b.Channel(ctx)
	if err != nil {
		panic(err)
	}
	defer ch.Close()

	if _, err := ch.QueueDeclare("orders", true, false, false, false, nil); err != nil {
		panic(err)
	}
	for i := range 3 {
		msg := amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: fmt.Appendf(nil, "order %d", i)}
		if err := ch.PublishWithContext(ctx, "", "orders", false, false, msg); err != nil {
			panic(err)
		}
	}
	// Get waits for the queue, which stored each message before handing
	// it out, so the count below is settled.
	for {
		d, ok, err := ch.Get("orders", false)
		if err != nil {
			panic(err)
		}
		if !ok {
			break
		}
		fmt.Printf("%s\n", d.Body)
		if err := d.Ack(false); err != nil {
			panic(err)
		}
	}
	fmt.Println("records appended:", counts.AppendedRecords.Load())
	// Output:
	// order 0
	// order 1
	// order 2
	// records appended: 3
}
