package storagetest_test

import (
	"testing"

	"github.com/warrenmq/broker/storage/storagetest"
)

// The openers of the example are real code: run the suite with them.

func TestExampleOpeners(t *testing.T) {
	t.Run("Memory", func(t *testing.T) { storagetest.Run(t, openMemory) })
	t.Run("Pebble", func(t *testing.T) { storagetest.Run(t, openPebble) })
}
