package direct

import amqp091 "github.com/rabbitmq/amqp091-go"

// amqp091-go's automatic recovery (Config.Recovery) reopens a channel lost
// with its network connection and redeclares what it declared. A Channel
// has no network to lose and no Recovery configuration: it behaves as an
// amqp091-go channel of a connection dialled without Config.Recovery,
// which is every connection unless the application opts in. A Channel the
// broker closed stays closed; open another with Broker.Channel.

// Reconnect is broker.Channel's Reconnect, documented there.
func (ch *Channel) Reconnect() error { return amqp091.ErrClosed }

// TopologyConfiguration is broker.Channel's TopologyConfiguration, documented there.
func (ch *Channel) TopologyConfiguration(global bool) amqp091.TopologyConfiguration {
	return amqp091.TopologyConfiguration{
		Exchanges: map[string]amqp091.ExchangeConfig{},
		Queues:    map[string]amqp091.QueueConfig{},
	}
}
