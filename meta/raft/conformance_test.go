package raft_test

import (
	"testing"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/metatest"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/storagetest"
	"github.com/warrenmq/broker/unacked"
	"github.com/warrenmq/broker/unacked/indextest"
)

func TestMetaConformance(t *testing.T) {
	t.Run("leader", func(t *testing.T) {
		metatest.Run(t, func(t *testing.T) meta.Store {
			c := newCluster(t, 3, 0)
			return c.nodes[c.waitLeader(testCtx(t))]
		}, metatest.Without("meta.Syncer"))
	})
	t.Run("follower", func(t *testing.T) {
		metatest.Run(t, func(t *testing.T) meta.Store {
			c := newCluster(t, 3, 0)
			return c.nodes[c.follower(testCtx(t))]
		}, metatest.Without("meta.Syncer"))
	})
}

func TestMetaPersistence(t *testing.T) {
	metatest.RunPersistence(t, func(t *testing.T) (meta.Store, func() meta.Store) {
		c := newCluster(t, 3, 0)
		reopen := func() meta.Store {
			for i := range c.nodes {
				c.stop(i)
			}
			for i := range c.nodes {
				c.start(i)
			}
			return c.nodes[c.follower(testCtx(t))]
		}
		return c.nodes[c.follower(testCtx(t))], reopen
	})
}

func TestShardConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) (storage.ShardStore, func() storage.ShardStore) {
		// A small snapshot interval makes the suite cross snapshots and
		// log compaction, and reopen restart from them.
		c := newCluster(t, 3, 16)
		reopen := func() storage.ShardStore {
			for i := range c.nodes {
				c.stop(i)
			}
			for i := range c.nodes {
				c.start(i)
			}
			return c.nodes[c.follower(testCtx(t))].Shards()
		}
		return c.nodes[c.follower(testCtx(t))].Shards(), reopen
	}, storagetest.Without("storage.MemoryReporter", "storage.TransientDropper", "storage.Purger"))
}

func TestIndexConformance(t *testing.T) {
	indextest.Run(t, func(t *testing.T) unacked.Index {
		c := newCluster(t, 3, 16)
		return c.nodes[c.follower(testCtx(t))].Unacked()
	})
}
