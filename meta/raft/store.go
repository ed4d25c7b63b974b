package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

var _ meta.Store = (*Node)(nil)

// Offset returns the queue's cursor, 0 if it was never set. It is
// linearizable: it sees every swap acknowledged before it was called.
func (n *Node) Offset(ctx context.Context, q meta.QueueKey) (uint64, error) {
	var off uint64
	err := n.read(ctx, func(db *pebble.DB) error {
		var err error
		off, err = getU64(db, metakey.Cursor(q.VHost, q.Name))
		return err
	})
	return off, err
}

// CompareAndSwapOffset sets the queue's cursor to new if it is old when the
// command is applied, in log order, so every node agrees on who won.
func (n *Node) CompareAndSwapOffset(ctx context.Context, q meta.QueueKey, old, new uint64) (bool, error) {
	var c cmd
	c.cas(metakey.Cursor(q.VHost, q.Name), old, new)
	r, err := n.submit(ctx, &c)
	return r.ok, err
}

// kv is the meta.KV under a Node's entities (meta.Typed): reads are
// linearizable reads of the state machine, and a write is one command of
// set and delete ops, the same ops the proposers of earlier versions
// wrote, so their logs apply unchanged.
type kv struct{ n *Node }

// Get reads the value under key, linearizably.
func (k kv) Get(ctx context.Context, key []byte) ([]byte, error) {
	var out []byte
	err := k.n.read(ctx, func(db *pebble.DB) error {
		v, closer, err := db.Get(key)
		if errors.Is(err, pebble.ErrNotFound) {
			return meta.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("raft: read %q: %w", key, err)
		}
		defer closer.Close()
		out = bytes.Clone(v)
		return nil
	})
	return out, err
}

// Scan iterates the keys that start with prefix, linearizably.
func (k kv) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	return k.n.read(ctx, func(db *pebble.DB) (err error) {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: codec.Successor(prefix)})
		if err != nil {
			return fmt.Errorf("raft: scan: %w", err)
		}
		defer func() {
			if cerr := it.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("raft: scan: %w", cerr)
			}
		}()
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return fmt.Errorf("raft: scan: %w", err)
			}
			if err := fn(it.Key(), v); err != nil {
				return err
			}
		}
		if err := it.Error(); err != nil {
			return fmt.Errorf("raft: scan: %w", err)
		}
		return nil
	})
}

// Write proposes b as one command (opSet for each record, then opDel for
// each key) and returns once it is committed and applied here. Every
// command is durable, so b.Durable is not looked at.
func (k kv) Write(ctx context.Context, b meta.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var c cmd
	for _, r := range b.Set {
		c.set(r.Key, r.Value)
	}
	for _, key := range b.Delete {
		c.del(key)
	}
	_, err := k.n.submit(ctx, &c)
	return err
}
