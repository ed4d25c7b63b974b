package storagetest_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/storage/storagetest"
)

// embedded wraps a store by embedding the interface: it forwards
// ShardStore's methods only.
type embedded struct{ storage.ShardStore }

// A wrapper by embedding loses the in-memory store's
// storage.MemoryReporter, and the suite says so: run in a child process
// with the in-memory store's own declaration, it fails naming it. The
// store storage.Wrap makes passes.
func TestEmbeddingWrapperFails(t *testing.T) {
	if os.Getenv("STORAGETEST_CHILD") == "1" {
		storagetest.Run(t, func(*testing.T) (storage.ShardStore, func() storage.ShardStore) {
			return embedded{memory.New()}, nil
		}, storagetest.Without(memoryLacks...))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEmbeddingWrapperFails$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STORAGETEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the suite passed a store that lost storage.MemoryReporter:\n%s", out)
	require.Contains(t, string(out), "storagetest_test.embedded does not implement storage.MemoryReporter")

	storagetest.Run(t, func(*testing.T) (storage.ShardStore, func() storage.ShardStore) {
		inner := memory.New()
		return storage.Wrap(embedded{inner}, inner), nil
	}, storagetest.Without(memoryLacks...))
}
