package memory_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/meta/metatest"
)

func open(testing.TB) meta.Store { return memory.New() }

func TestConformance(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store { return open(t) },
		metatest.Without("meta.ChangeFeed", "meta.Records", "meta.Replicated", "meta.Syncer"))
}

func TestIsLeader(t *testing.T) {
	require.True(t, memory.New().IsLeader())
}

func BenchmarkCompareAndSwapOffset(b *testing.B) {
	metatest.Bench(b, func(b *testing.B) meta.Store { return open(b) })
}
