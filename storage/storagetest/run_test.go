package storagetest_test

import (
	"testing"

	"github.com/warrenmq/broker/storage/storagetest"
)

// The openers of the example are real code: run the suite with them.

// What each backend does not offer (storage.Capabilities).
var (
	memoryLacks = []string{"storage.Syncer", "storage.TransientDropper", "storage.Purger"}
	pebbleLacks = []string{"storage.MemoryReporter"}
)

func TestExampleOpeners(t *testing.T) {
	t.Run("Memory", func(t *testing.T) { storagetest.Run(t, openMemory, storagetest.Without(memoryLacks...)) })
	t.Run("Pebble", func(t *testing.T) { storagetest.Run(t, openPebble, storagetest.Without(pebbleLacks...)) })
}
