package broker

import (
	"sync"

	"github.com/warrenmq/broker/amqp"
)

// connCounts counts the open connections for the connection limits: of the
// whole broker and per vhost.
type connCounts struct {
	mu struct {
		sync.Mutex
		n       int
		byVHost map[string]int
	}
}

// admitConnection counts a connection.open against Options.MaxConnections
// (the whole broker, RabbitMQ's connection_max) and the vhost's connection
// limit (RabbitMQ's max-connections vhost limit: the one Admin.PutVHostLimit
// stored, else Options.VHostMaxConnections'). Over a limit it returns
// RabbitMQ's 530 NOT_ALLOWED refusal; otherwise a release func to call
// exactly once when the connection ends. Connections are counted from
// connection.open-ok, as RabbitMQ's limits count them: a client still in
// the handshake holds no slot.
func (b *Broker) admitConnection(user, vh string) (func(), *amqp.Error) {
	return b.admit(user, vh, true)
}

// admitDirect is admitConnection for a direct Channel: the vhost's
// connection limit only.
func (b *Broker) admitDirect(user, vh string) (func(), *amqp.Error) {
	return b.admit(user, vh, false)
}

func (b *Broker) admit(user, vh string, network bool) (func(), *amqp.Error) {
	b.limits.mu.Lock()
	defer b.limits.mu.Unlock()
	if limit := b.opts.MaxConnections; network && limit > 0 && b.limits.mu.n >= limit {
		return nil, amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen,
			"access to vhost '%s' refused for user '%s': node connection limit (%d) is reached", vh, user, limit)
	}
	if limit, ok := b.connectionLimit(vh); ok && b.limits.mu.byVHost[vh] >= limit {
		return nil, amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen,
			"access to vhost '%s' refused for user '%s': connection limit (%d) is reached", vh, user, limit)
	}
	if b.limits.mu.byVHost == nil {
		b.limits.mu.byVHost = make(map[string]int)
	}
	if network {
		b.limits.mu.n++
	}
	b.limits.mu.byVHost[vh]++
	return func() {
		b.limits.mu.Lock()
		defer b.limits.mu.Unlock()
		if network {
			b.limits.mu.n--
		}
		if b.limits.mu.byVHost[vh]--; b.limits.mu.byVHost[vh] == 0 {
			delete(b.limits.mu.byVHost, vh)
		}
	}, nil
}
