package broker_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/memory"
)

// writeOrder is a meta.Store that records the order of its user and
// permission writes.
type writeOrder struct {
	meta.Store
	mu     sync.Mutex
	writes []string
}

func (w *writeOrder) record(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, what)
}

func (w *writeOrder) PutUser(ctx context.Context, u meta.User) error {
	w.record("user " + u.Name)
	return w.Store.PutUser(ctx, u)
}

func (w *writeOrder) PutPermission(ctx context.Context, p meta.Permission) error {
	w.record("permission " + p.User + "@" + p.VHost)
	return w.Store.PutPermission(ctx, p)
}

// TestSeedWritesPermissionsBeforeUser: New seeds an Options.Users entry's
// permissions before the user, because a broker sharing the store takes a
// stored user as seeded and must then find its permissions too (a client
// it let in between the two writes was refused 530).
func TestSeedWritesPermissionsBeforeUser(t *testing.T) {
	inner := memory.New()
	w := &writeOrder{Store: inner}
	b, err := broker.New(broker.Options{
		Storage: broker.StorageOptions{Meta: meta.Wrap(w, inner)},
		Users:   []broker.User{{Name: "svc", Password: "pw"}},
		VHosts:  []string{"/", "orders"},
	})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.Equal(t, []string{"permission svc@/", "permission svc@orders", "user svc"}, w.writes)
}
