package metatest_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/meta/metatest"
)

// syncing is a store with one optional interface, meta.Syncer.
type syncing struct{ *memory.Store }

func (syncing) Sync(ctx context.Context) error { return ctx.Err() }

// embedded wraps a store the easy way, by embedding the interface: it
// forwards Store's methods only.
type embedded struct{ meta.Store }

var without = []string{"meta.ChangeFeed", "meta.Records", "meta.Replicated"}

// The store Wrap makes keeps the wrapped store's meta.Syncer: the suite
// passes with the same declaration as the store itself.
func TestWrapKeepsCapabilities(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store {
		inner := syncing{memory.New()}
		return meta.Wrap(embedded{inner}, inner)
	}, metatest.Without(without...))
}

// A wrapper by embedding loses meta.Syncer, and the suite says so: run in
// a child process, it fails naming the capability.
func TestEmbeddingWrapperFails(t *testing.T) {
	if os.Getenv("METATEST_CHILD") == "1" {
		metatest.Run(t, func(t *testing.T) meta.Store { return embedded{syncing{memory.New()}} },
			metatest.Without(without...))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEmbeddingWrapperFails$", "-test.count=1")
	cmd.Env = append(os.Environ(), "METATEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the suite passed a store that lost meta.Syncer:\n%s", out)
	require.Contains(t, string(out), `metatest_test.embedded does not implement meta.Syncer`)
}
