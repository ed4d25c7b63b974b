package unacked_test

import (
	"testing"

	"github.com/warrenmq/broker/unacked"
	"github.com/warrenmq/broker/unacked/indextest"
)

func TestMemoryIndex(t *testing.T) {
	indextest.Run(t, func(t *testing.T) unacked.Index { return unacked.NewMemoryIndex() }, indextest.Without("unacked.Claimer"))
}

func BenchmarkMemoryIndex(b *testing.B) {
	indextest.Bench(b, func(b *testing.B) unacked.Index { return unacked.NewMemoryIndex() })
}
