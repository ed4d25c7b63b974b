package broker

import (
	"github.com/warrenmq/broker/amqp"
)

// admitConnection counts a connection.open against Options.MaxConnections
// (the whole broker, RabbitMQ's connection_max) and
// Options.VHostMaxConnections (RabbitMQ's max-connections vhost limit). Over
// a limit it returns RabbitMQ's 530 NOT_ALLOWED refusal; otherwise a release
// func to call exactly once when the connection ends. Connections are
// counted from connection.open-ok, as RabbitMQ's limits count them: a
// client still in the handshake holds no slot.
func (b *Broker) admitConnection(user, vh string) (func(), error) {
	b.acct.mu.Lock()
	defer b.acct.mu.Unlock()
	if limit := b.opts.MaxConnections; limit > 0 && b.acct.mu.conns >= limit {
		return nil, amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen,
			"access to vhost '%s' refused for user '%s': node connection limit (%d) is reached", vh, user, limit)
	}
	if limit, ok := b.opts.VHostMaxConnections[vh]; ok && limit >= 0 && b.acct.mu.byVHost[vh] >= limit {
		return nil, amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen,
			"access to vhost '%s' refused for user '%s': connection limit (%d) is reached", vh, user, limit)
	}
	if b.acct.mu.byVHost == nil {
		b.acct.mu.byVHost = make(map[string]int)
	}
	b.acct.mu.conns++
	b.acct.mu.byVHost[vh]++
	return func() {
		b.acct.mu.Lock()
		defer b.acct.mu.Unlock()
		b.acct.mu.conns--
		if b.acct.mu.byVHost[vh]--; b.acct.mu.byVHost[vh] == 0 {
			delete(b.acct.mu.byVHost, vh)
		}
	}, nil
}
