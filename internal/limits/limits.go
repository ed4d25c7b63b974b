package limits

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/meta"
)

// The vhost limits RabbitMQ knows (rabbit_vhost_limit's validation).
const (
	MaxConnections = "max-connections"
	MaxQueues      = "max-queues"
)

// Limits is the broker's limits. Set its configuration fields before
// first use; it is then safe for concurrent use.
type Limits struct {
	// Store keeps the vhost limits.
	Store meta.VHostLimits
	// MaxConnections bounds the broker's network connections; zero or
	// negative is no limit.
	MaxConnections int
	// VHostMaxConnections are the configured max-connections of vhosts
	// (by canonical name) without a stored one; negative is no limit.
	VHostMaxConnections map[string]int

	mu     sync.RWMutex
	stored map[string]map[string]int64 // vhost -> limit name -> value

	conns struct {
		sync.Mutex
		n       int
		byVHost map[string]int
	}
}

// CheckName refuses a limit name RabbitMQ does not know.
func CheckName(name string) error {
	if name != MaxConnections && name != MaxQueues {
		return fmt.Errorf("broker: unknown vhost limit %q (want %s or %s)", name, MaxConnections, MaxQueues)
	}
	return nil
}

// Load replaces the limits in memory with the stored ones.
func (l *Limits) Load(ctx context.Context) error {
	stored, err := l.Store.ListVHostLimits(ctx)
	if err != nil {
		return fmt.Errorf("broker: list vhost limits: %w", err)
	}
	m := make(map[string]map[string]int64)
	for _, s := range stored {
		vh := s.VHost
		if vh == "" {
			vh = "/"
		}
		if m[vh] == nil {
			m[vh] = make(map[string]int64)
		}
		m[vh][s.Name] = s.Value
	}
	l.mu.Lock()
	l.stored = m
	l.mu.Unlock()
	return nil
}

// Get returns vhost vh's stored limit called name, false when it has none.
func (l *Limits) Get(vh, name string) (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	v, ok := l.stored[vh][name]
	return v, ok
}

// All returns a copy of every vhost's stored limits.
func (l *Limits) All() map[string]map[string]int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make(map[string]map[string]int64, len(l.stored))
	for vh, m := range l.stored {
		out[vh] = maps.Clone(m)
	}
	return out
}

// Put stores vhost vh's limit called name (CheckName's) and keeps it.
func (l *Limits) Put(ctx context.Context, vh, name string, value int64) error {
	if err := l.Store.PutVHostLimit(ctx, meta.VHostLimit{VHost: vh, Name: name, Value: value}); err != nil {
		return fmt.Errorf("broker: set limit of vhost %q: %w", vh, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stored == nil {
		l.stored = make(map[string]map[string]int64)
	}
	if l.stored[vh] == nil {
		l.stored[vh] = make(map[string]int64)
	}
	l.stored[vh][name] = value
	return nil
}

// Delete removes vhost vh's stored limit called name; removing one it
// does not have is not an error.
func (l *Limits) Delete(ctx context.Context, vh, name string) error {
	if err := l.Store.DeleteVHostLimit(ctx, vh, name); err != nil {
		return fmt.Errorf("broker: clear limit of vhost %q: %w", vh, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.stored[vh], name)
	if len(l.stored[vh]) == 0 {
		delete(l.stored, vh)
	}
	return nil
}

// DropVHost removes every stored limit of a deleted vhost.
func (l *Limits) DropVHost(ctx context.Context, vh string) error {
	var errs []error
	if ls, err := l.Store.ListVHostLimits(ctx); err == nil {
		for _, s := range ls {
			if s.VHost == vh {
				errs = append(errs, l.Store.DeleteVHostLimit(ctx, vh, s.Name))
			}
		}
	} else {
		errs = append(errs, err)
	}
	l.mu.Lock()
	delete(l.stored, vh)
	l.mu.Unlock()
	return errors.Join(errs...)
}

// ConnectionLimit is the max-connections limit of vhost vh: the stored
// one, else the configured one; false when there is none.
func (l *Limits) ConnectionLimit(vh string) (int, bool) {
	if n, ok := l.Get(vh, MaxConnections); ok {
		if n < 0 {
			return 0, false
		}
		return int(min(n, int64(^uint(0)>>1))), true
	}
	n, ok := l.VHostMaxConnections[vh]
	return n, ok && n >= 0
}

// Admit counts a connection.open of user on vh against the vhost's
// connection limit and, for a network connection (not a direct Channel),
// the broker's. Over a limit it returns RabbitMQ's 530 NOT_ALLOWED
// refusal; otherwise a release func to call exactly once when the
// connection ends.
func (l *Limits) Admit(user, vh string, network bool) (func(), *amqp.Error) {
	c := &l.conns
	c.Lock()
	defer c.Unlock()
	if limit := l.MaxConnections; network && limit > 0 && c.n >= limit {
		return nil, amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen,
			"access to vhost '%s' refused for user '%s': node connection limit (%d) is reached", vh, user, limit)
	}
	if limit, ok := l.ConnectionLimit(vh); ok && c.byVHost[vh] >= limit {
		return nil, amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen,
			"access to vhost '%s' refused for user '%s': connection limit (%d) is reached", vh, user, limit)
	}
	if c.byVHost == nil {
		c.byVHost = make(map[string]int)
	}
	if network {
		c.n++
	}
	c.byVHost[vh]++
	return func() {
		c.Lock()
		defer c.Unlock()
		if network {
			c.n--
		}
		if c.byVHost[vh]--; c.byVHost[vh] == 0 {
			delete(c.byVHost, vh)
		}
	}, nil
}
