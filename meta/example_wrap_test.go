package meta_test

import (
	"context"
	"fmt"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/memory"
)

// syncing is a store with an optional interface: meta.Syncer.
type syncing struct{ *memory.Store }

func (syncing) Sync(ctx context.Context) error { return ctx.Err() }

// counting counts queue writes. It embeds meta.Store, so it forwards
// every Store method it does not override, and no optional interface.
type counting struct {
	meta.Store
	puts *int
}

func (c counting) PutQueue(ctx context.Context, q meta.Queue) error {
	*c.puts++
	return c.Store.PutQueue(ctx, q)
}

// A wrapper written by embedding hides the wrapped store's optional
// interfaces; Wrap gives them back, so the broker still finds them.
func ExampleWrap() {
	inner := syncing{memory.New()}
	var puts int
	w := counting{Store: inner, puts: &puts}
	fmt.Println("embedding hides:", meta.Hidden(w))

	store := meta.Wrap(w, inner) // pass this to broker.Options.Storage.Meta
	_ = store.PutQueue(context.Background(), meta.Queue{VHost: "/", Name: "q"})
	_, syncs := store.(meta.Syncer)
	fmt.Println("hidden after Wrap:", meta.Hidden(store), "syncs:", syncs, "puts counted:", puts)
	// Output:
	// embedding hides: [meta.Syncer]
	// hidden after Wrap: [] syncs: true puts counted: 1
}
