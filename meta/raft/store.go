package raft

import (
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
		off, err = getU64(db, metakey.Cursor(q))
		return err
	})
	return off, err
}

// CompareAndSwapOffset sets the queue's cursor to new if it is old when the
// command is applied, in log order, so every node agrees on who won.
func (n *Node) CompareAndSwapOffset(ctx context.Context, q meta.QueueKey, old, new uint64) (bool, error) {
	var c cmd
	c.cas(metakey.Cursor(q), old, new)
	r, err := n.submit(ctx, &c)
	return r.ok, err
}

// PutExchange stores e.
func (n *Node) PutExchange(ctx context.Context, e meta.Exchange) error {
	return n.put(ctx, metakey.Name(metakey.KindExch, e.VHost, e.Name), e)
}

// GetExchange returns the exchange or an error matching meta.ErrNotFound.
func (n *Node) GetExchange(ctx context.Context, vhost, name string) (meta.Exchange, error) {
	var e meta.Exchange
	err := n.get(ctx, metakey.Name(metakey.KindExch, vhost, name), &e)
	if errors.Is(err, meta.ErrNotFound) {
		err = fmt.Errorf("%w: exchange %q in vhost %q", err, name, vhost)
	}
	return e, err
}

// DeleteExchange removes the exchange; a missing one is not an error.
func (n *Node) DeleteExchange(ctx context.Context, vhost, name string) error {
	return n.del(ctx, metakey.Name(metakey.KindExch, vhost, name))
}

// ListExchanges returns the vhost's exchanges sorted by name.
func (n *Node) ListExchanges(ctx context.Context, vhost string) ([]meta.Exchange, error) {
	return list[meta.Exchange](ctx, n, metakey.VHostPrefix(metakey.KindExch, vhost))
}

// PutQueue stores q; the cursor is left alone.
func (n *Node) PutQueue(ctx context.Context, q meta.Queue) error {
	return n.put(ctx, metakey.Name(metakey.KindQueue, q.VHost, q.Name), q)
}

// GetQueue returns the queue or an error matching meta.ErrNotFound.
func (n *Node) GetQueue(ctx context.Context, vhost, name string) (meta.Queue, error) {
	var q meta.Queue
	err := n.get(ctx, metakey.Name(metakey.KindQueue, vhost, name), &q)
	if errors.Is(err, meta.ErrNotFound) {
		err = fmt.Errorf("%w: queue %q in vhost %q", err, name, vhost)
	}
	return q, err
}

// DeleteQueue removes the queue and its cursor in one command.
func (n *Node) DeleteQueue(ctx context.Context, vhost, name string) error {
	var c cmd
	c.del(metakey.Name(metakey.KindQueue, vhost, name))
	c.del(metakey.Cursor(meta.QueueKey{VHost: vhost, Name: name}))
	_, err := n.submit(ctx, &c)
	return err
}

// ListQueues returns the vhost's queues sorted by name.
func (n *Node) ListQueues(ctx context.Context, vhost string) ([]meta.Queue, error) {
	return list[meta.Queue](ctx, n, metakey.VHostPrefix(metakey.KindQueue, vhost))
}

// PutBinding stores b, replacing the binding with the same key.
func (n *Node) PutBinding(ctx context.Context, b meta.Binding) error {
	if err := checkBinding(b); err != nil {
		return err
	}
	return n.put(ctx, metakey.Binding(b), b)
}

// DeleteBinding removes the binding with b's key; a missing one is not an
// error.
func (n *Node) DeleteBinding(ctx context.Context, b meta.Binding) error {
	if err := checkBinding(b); err != nil {
		return err
	}
	return n.del(ctx, metakey.Binding(b))
}

// ListBindings returns the vhost's bindings.
func (n *Node) ListBindings(ctx context.Context, vhost string) ([]meta.Binding, error) {
	return list[meta.Binding](ctx, n, metakey.VHostPrefix(metakey.KindBinding, vhost))
}

// PutVHost stores v.
func (n *Node) PutVHost(ctx context.Context, v meta.VHost) error {
	return n.put(ctx, metakey.VHost(v.Name), v)
}

// GetVHost returns the vhost or an error matching meta.ErrNotFound.
func (n *Node) GetVHost(ctx context.Context, name string) (meta.VHost, error) {
	var v meta.VHost
	err := n.get(ctx, metakey.VHost(name), &v)
	if errors.Is(err, meta.ErrNotFound) {
		err = fmt.Errorf("%w: vhost %q", err, name)
	}
	return v, err
}

// DeleteVHost removes the vhost record; its contents are the broker's to
// delete first.
func (n *Node) DeleteVHost(ctx context.Context, name string) error {
	return n.del(ctx, metakey.VHost(name))
}

// ListVHosts returns every vhost sorted by name.
func (n *Node) ListVHosts(ctx context.Context) ([]meta.VHost, error) {
	return list[meta.VHost](ctx, n, metakey.KindPrefix(metakey.KindVHost))
}

// PutUser stores u. The name must not be empty.
func (n *Node) PutUser(ctx context.Context, u meta.User) error {
	if u.Name == "" {
		return errEmptyUser
	}
	return n.put(ctx, metakey.User(u.Name), u)
}

// GetUser returns the user or an error matching meta.ErrNotFound.
func (n *Node) GetUser(ctx context.Context, name string) (meta.User, error) {
	var u meta.User
	err := n.get(ctx, metakey.User(name), &u)
	if errors.Is(err, meta.ErrNotFound) {
		err = fmt.Errorf("%w: user %q", err, name)
	}
	return u, err
}

// DeleteUser removes the user.
func (n *Node) DeleteUser(ctx context.Context, name string) error {
	return n.del(ctx, metakey.User(name))
}

// ListUsers returns every user sorted by name.
func (n *Node) ListUsers(ctx context.Context) ([]meta.User, error) {
	return list[meta.User](ctx, n, metakey.KindPrefix(metakey.KindUser))
}

// PutPermission stores p keyed by user and vhost. The user must not be
// empty.
func (n *Node) PutPermission(ctx context.Context, p meta.Permission) error {
	if p.User == "" {
		return errEmptyUser
	}
	return n.put(ctx, metakey.Perm(p.User, p.VHost), p)
}

// GetPermission returns the permission or an error matching
// meta.ErrNotFound.
func (n *Node) GetPermission(ctx context.Context, user, vhost string) (meta.Permission, error) {
	var p meta.Permission
	err := n.get(ctx, metakey.Perm(user, vhost), &p)
	if errors.Is(err, meta.ErrNotFound) {
		err = fmt.Errorf("%w: permission of user %q on vhost %q", err, user, vhost)
	}
	return p, err
}

// DeletePermission removes the permission; a missing one is not an error.
func (n *Node) DeletePermission(ctx context.Context, user, vhost string) error {
	return n.del(ctx, metakey.Perm(user, vhost))
}

// ListPermissions returns every permission, grouped by user.
func (n *Node) ListPermissions(ctx context.Context) ([]meta.Permission, error) {
	return list[meta.Permission](ctx, n, metakey.KindPrefix(metakey.KindPerm))
}

var errEmptyUser = errors.New("raft: empty user name")

// checkBinding rejects a destination kind the router would not understand.
func checkBinding(b meta.Binding) error {
	switch b.DestinationKind {
	case meta.DestinationQueue, meta.DestinationExchange:
		return nil
	}
	return fmt.Errorf("raft: binding destination kind %q is neither %q nor %q",
		b.DestinationKind, meta.DestinationQueue, meta.DestinationExchange)
}

func (n *Node) put(ctx context.Context, key []byte, v any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	val, err := meta.EncodeRecord(v)
	if err != nil {
		return fmt.Errorf("raft: encode %T: %w", v, err)
	}
	return n.putRecord(ctx, key, val)
}

// putRecord writes an encoded record under key.
func (n *Node) putRecord(ctx context.Context, key, val []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var c cmd
	c.set(key, val)
	_, err := n.submit(ctx, &c)
	return err
}

func (n *Node) del(ctx context.Context, key []byte) error {
	var c cmd
	c.del(key)
	_, err := n.submit(ctx, &c)
	return err
}

// get reads the JSON value under key into v, linearizably.
func (n *Node) get(ctx context.Context, key []byte, v any) error {
	return n.read(ctx, func(db *pebble.DB) error {
		val, closer, err := db.Get(key)
		if errors.Is(err, pebble.ErrNotFound) {
			return meta.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("raft: read %T: %w", v, err)
		}
		defer closer.Close()
		if err := meta.DecodeRecord(val, v); err != nil {
			return fmt.Errorf("raft: corrupt %T under key %q: %w", v, key, err)
		}
		return nil
	})
}

// list decodes every value whose key starts with prefix, in key order,
// linearizably.
func list[T any](ctx context.Context, n *Node, prefix []byte) ([]T, error) {
	out := []T{}
	err := n.read(ctx, func(db *pebble.DB) (err error) {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: codec.Successor(prefix)})
		if err != nil {
			return fmt.Errorf("raft: list: %w", err)
		}
		defer func() {
			if cerr := it.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("raft: list: %w", cerr)
			}
		}()
		for ok := it.First(); ok; ok = it.Next() {
			val, err := it.ValueAndErr()
			if err != nil {
				return fmt.Errorf("raft: list: %w", err)
			}
			var v T
			if err := meta.DecodeRecord(val, &v); err != nil {
				return fmt.Errorf("raft: corrupt %T under key %q: %w", v, it.Key(), err)
			}
			out = append(out, v)
		}
		if err := it.Error(); err != nil {
			return fmt.Errorf("raft: list: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
