package broker_test

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// settingsDoors open a channel as user on vhost through each door: TCP
// and Broker.Dial through amqp091-go, and the direct Channel. Each returns
// the channel and a func that closes its connection; the error is the one
// the open failed with.
var settingsDoors = []struct {
	name string
	open func(t *testing.T, b *broker.Broker, user, vhost string) (parityChannel, func(), error)
}{
	{"tcp", func(t *testing.T, b *broker.Broker, user, vhost string) (parityChannel, func(), error) {
		return amqpDoor(t, amqptest.UserURL(b.URL(), user, user)+vhostPath(vhost), amqp091.Config{})
	}},
	{"dial", func(t *testing.T, b *broker.Broker, user, vhost string) (parityChannel, func(), error) {
		return amqpDoor(t, "amqp://"+user+":"+user+"@localhost/"+vhostPath(vhost), amqp091.Config{Dial: b.Dial})
	}},
	{"direct", func(t *testing.T, b *broker.Broker, user, vhost string) (parityChannel, func(), error) {
		ch, err := b.Channel(t.Context(), broker.AsUser(user), broker.OnVHost(vhost))
		if err != nil {
			return nil, nil, err
		}
		t.Cleanup(func() { _ = ch.Close() })
		return ch, func() { _ = ch.Close() }, nil
	}},
}

func vhostPath(vhost string) string {
	if vhost == "/" {
		return "%2F"
	}
	return vhost
}

func amqpDoor(t *testing.T, url string, cfg amqp091.Config) (parityChannel, func(), error) {
	conn, err := amqp091.DialConfig(url, cfg)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	return ch, func() { _ = conn.Close() }, nil
}

// settingsBroker is a served broker with vhost "v" on which alice and bob
// (passwords as names) have every permission.
func settingsBroker(t *testing.T) *broker.Broker {
	t.Helper()
	b := startBroker(t, broker.Options{VHosts: []string{"/", "v"}, Users: []broker.User{
		{Name: "alice", Password: "alice"}, {Name: "bob", Password: "bob"}}})
	return b
}

// TestVHostDefaultQueueType: on a vhost whose default queue type is
// quorum, through every door, a durable queue declared without
// x-queue-type is a quorum queue (redeclaring it as classic is 406, as in
// RabbitMQ 3.11+), an exclusive one stays classic, and the metadata
// survives in GetVHost.
func TestVHostDefaultQueueType(t *testing.T) {
	b := settingsBroker(t)
	ctx := context.Background()
	created, err := b.Admin().PutVHost(ctx, broker.VHost{Name: "v", Description: "orders", Tags: []string{"eu"}, DefaultQueueType: "quorum"})
	require.NoError(t, err)
	require.False(t, created, "v exists")
	info, err := b.Admin().GetVHost(ctx, "v")
	require.NoError(t, err)
	require.Equal(t, broker.VHost{Name: "v", Description: "orders", Tags: []string{"eu"}, DefaultQueueType: "quorum"}, info)
	_, err = b.Admin().PutVHost(ctx, broker.VHost{Name: "v", DefaultQueueType: "lazy"})
	require.ErrorContains(t, err, "unknown queue type 'lazy'")

	for _, door := range settingsDoors {
		t.Run(door.name, func(t *testing.T) {
			ch, _, err := door.open(t, b, "alice", "v")
			require.NoError(t, err)
			name := "q-" + door.name
			_, err = ch.QueueDeclare(name, true, false, false, false, nil)
			require.NoError(t, err)
			_, err = ch.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
			require.NoError(t, err, "the default was written into the queue's arguments")
			_, err = ch.QueueDeclare(name, true, false, false, false, nil)
			require.NoError(t, err)
			_, err = ch.QueueDeclare("ex-"+door.name, true, false, true, false, nil)
			require.NoError(t, err, "exclusive: classic")
			_, err = ch.QueueDeclare("ex-"+door.name, true, false, true, false, amqp091.Table{"x-queue-type": "classic"})
			require.NoError(t, err)
			_, err = ch.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": "classic"})
			amqptest.RequireReply(t, err, 406, "inequivalent arg 'x-queue-type' for queue '"+name+"' in vhost 'v': received 'classic' but current is 'quorum'")
		})
	}
}

// TestVHostConnectionLimit: a max-connections limit counts the
// connections of every door, and refuses one over it with 530 and
// RabbitMQ's text on every door; 0 refuses all, and clearing the limit
// lets them in.
func TestVHostConnectionLimit(t *testing.T) {
	b := settingsBroker(t)
	ctx := context.Background()
	require.NoError(t, b.Admin().PutVHostLimit(ctx, "v", broker.LimitMaxConnections, 1))
	limits, err := b.Admin().ListVHostLimits(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]map[string]int64{"v": {"max-connections": 1}}, limits)
	const refused = "access to vhost 'v' refused for user 'bob': connection limit (1) is reached"
	for _, holder := range settingsDoors {
		t.Run("held by "+holder.name, func(t *testing.T) {
			_, release, err := holder.open(t, b, "alice", "v")
			require.NoError(t, err)
			for _, door := range settingsDoors {
				_, _, err := door.open(t, b, "bob", "v")
				amqptest.RequireReply(t, err, 530, refused)
			}
			_, closeOther, err := settingsDoors[0].open(t, b, "bob", "/")
			require.NoError(t, err, "another vhost is not limited")
			closeOther()
			release()
			amqptest.Poll(t, func() bool {
				_, c, err := settingsDoors[2].open(t, b, "bob", "v")
				if err == nil {
					c()
				}
				return err == nil
			}, "the closed connection's place is given back")
		})
	}
	require.NoError(t, b.Admin().PutVHostLimit(ctx, "v", broker.LimitMaxConnections, 0))
	for _, door := range settingsDoors {
		_, _, err := door.open(t, b, "bob", "v")
		amqptest.RequireReply(t, err, 530, "connection limit (0) is reached")
	}
	require.NoError(t, b.Admin().DeleteVHostLimit(ctx, "v", broker.LimitMaxConnections))
	for _, door := range settingsDoors {
		_, c, err := door.open(t, b, "bob", "v")
		require.NoError(t, err, door.name)
		c()
	}
	require.Error(t, b.Admin().PutVHostLimit(ctx, "v", "max-fun", 1))
	require.Error(t, b.Admin().PutVHostLimit(ctx, "nope", broker.LimitMaxQueues, 1))
}

// TestVHostQueueLimit: max-queues through every door, 406 with
// RabbitMQ's text; an existing queue can still be redeclared.
func TestVHostQueueLimit(t *testing.T) {
	b := settingsBroker(t)
	require.NoError(t, b.Admin().PutVHostLimit(context.Background(), "v", broker.LimitMaxQueues, 1))
	ch, _, err := settingsDoors[0].open(t, b, "alice", "v")
	require.NoError(t, err)
	_, err = ch.QueueDeclare("only", false, false, false, false, nil)
	require.NoError(t, err)
	for _, door := range settingsDoors {
		t.Run(door.name, func(t *testing.T) {
			ch, _, err := door.open(t, b, "alice", "v")
			require.NoError(t, err)
			_, err = ch.QueueDeclare("only", false, false, false, false, nil)
			require.NoError(t, err)
			_, err = ch.QueueDeclare("more", false, false, false, false, nil)
			amqptest.RequireReply(t, err, 406, "cannot declare queue 'more': queue limit in vhost 'v' (1) is reached")
		})
	}
}

// TestTopicPermissions: on every door, a publish to a topic exchange with
// a routing key the user's write pattern does not match, and a bind or
// unbind with a key its read pattern does not match, close the channel
// with 403 and RabbitMQ's text; {username} and {vhost} are expanded;
// other exchanges, and topic exchanges without a topic permission, are
// not restricted.
func TestTopicPermissions(t *testing.T) {
	b := settingsBroker(t)
	ctx := context.Background()
	created, err := b.Admin().PutTopicPermission(ctx, broker.TopicPermission{User: "alice", VHost: "v", Exchange: "amq.topic", Write: "^{username}\\.", Read: "^{vhost}\\."})
	require.NoError(t, err)
	require.True(t, created)
	_, err = b.Admin().PutTopicPermission(ctx, broker.TopicPermission{User: "alice", VHost: "v", Exchange: "x", Write: "(", Read: ""})
	require.Error(t, err, "a regexp that does not compile")
	_, err = b.Admin().PutTopicPermission(ctx, broker.TopicPermission{User: "nobody", VHost: "v", Exchange: "x"})
	require.Error(t, err)

	type step struct {
		name string
		do   func(ch parityChannel) error
		text string // the 403's, "" when allowed
	}
	pub := func(x, key string) func(ch parityChannel) error {
		return func(ch parityChannel) error {
			closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
			if err := ch.PublishWithContext(ctx, x, key, false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
				return err
			}
			// A sync method after the publish: the refusal, if any,
			// closed the channel before its answer.
			if _, err := ch.QueueDeclarePassive("q", false, false, false, false, nil); err != nil {
				if e := <-closed; e != nil {
					return e
				}
				return err
			}
			return nil
		}
	}
	refused := func(key string) string {
		return "access to topic '" + key + "' in exchange 'amq.topic' in vhost 'v' refused for user 'alice'"
	}
	steps := []step{
		{"publish own key", pub("amq.topic", "alice.a"), ""},
		{"publish other key", pub("amq.topic", "bob.a"), refused("bob.a")},
		{"publish to a direct exchange", pub("amq.direct", "bob.a"), ""},
		{"publish to a topic exchange without topic permission", pub("other.topic", "bob.a"), ""},
		{"bind own vhost", func(ch parityChannel) error { return ch.QueueBind("q", "v.#", "amq.topic", false, nil) }, ""},
		{"bind other", func(ch parityChannel) error { return ch.QueueBind("q", "w.#", "amq.topic", false, nil) }, refused("w.#")},
		{"unbind other", func(ch parityChannel) error { return ch.QueueUnbind("q", "w.#", "amq.topic", nil) }, refused("w.#")},
		{"unbind own", func(ch parityChannel) error { return ch.QueueUnbind("q", "v.#", "amq.topic", nil) }, ""},
		{"exchange bind other", func(ch parityChannel) error {
			return ch.ExchangeBind("other.topic", "w.#", "amq.topic", false, nil)
		}, refused("w.#")},
	}
	setupCh, _, err := settingsDoors[0].open(t, b, "alice", "v")
	require.NoError(t, err)
	_, err = setupCh.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, setupCh.ExchangeDeclare("other.topic", "topic", false, false, false, false, nil))
	for _, door := range settingsDoors {
		for _, s := range steps {
			t.Run(door.name+"/"+s.name, func(t *testing.T) {
				ch, _, err := door.open(t, b, "alice", "v")
				require.NoError(t, err)
				err = s.do(ch)
				if s.text == "" {
					require.NoError(t, err)
					return
				}
				amqptest.RequireReply(t, err, 403, s.text)
			})
		}
	}
	// bob has no topic permission: not restricted.
	ch, _, err := settingsDoors[1].open(t, b, "bob", "v")
	require.NoError(t, err)
	require.NoError(t, pub("amq.topic", "anything")(ch))

	// A change reaches open connections; clearing lifts the restriction.
	ch, _, err = settingsDoors[1].open(t, b, "alice", "v")
	require.NoError(t, err)
	require.NoError(t, b.Admin().DeleteTopicPermission(ctx, "alice", "v", ""))
	require.NoError(t, pub("amq.topic", "bob.a")(ch))
	_, err = b.Admin().PutTopicPermission(ctx, broker.TopicPermission{User: "alice", VHost: "v", Exchange: "amq.topic", Write: "", Read: ""})
	require.NoError(t, err)
	amqptest.RequireReply(t, pub("amq.topic", "bob.a")(ch), 403, refused("bob.a"))
}

// TestVHostSettingsSurviveRestart: with DataDir, a vhost's metadata, its
// limits and topic permissions are there after a restart (the vhost is
// reopened with its stored record, not a bare name).
func TestVHostSettingsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	opts := broker.Options{DataDir: dir, VHosts: []string{"/", "v"}, Users: []broker.User{{Name: "alice", Password: "alice"}}}
	ctx := context.Background()
	b, err := broker.New(opts)
	require.NoError(t, err)
	_, err = b.Admin().PutVHost(ctx, broker.VHost{Name: "v", Description: "d", Tags: []string{"t"}, DefaultQueueType: "quorum"})
	require.NoError(t, err)
	require.NoError(t, b.Admin().PutVHostLimit(ctx, "v", broker.LimitMaxQueues, 0))
	_, err = b.Admin().PutTopicPermission(ctx, broker.TopicPermission{User: "alice", VHost: "v", Exchange: "amq.topic", Write: "^a", Read: ".*"})
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b, err = broker.New(opts)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	info, err := b.Admin().GetVHost(ctx, "v")
	require.NoError(t, err)
	require.Equal(t, broker.VHost{Name: "v", Description: "d", Tags: []string{"t"}, DefaultQueueType: "quorum", Limits: map[string]int64{"max-queues": 0}}, info)
	ch, err := b.Channel(ctx, broker.OnVHost("v"))
	require.NoError(t, err)
	_, err = ch.QueueDeclare("q", true, false, false, false, nil)
	amqptest.RequireReply(t, err, 406, "queue limit in vhost 'v' (0) is reached")
	tps, err := b.Admin().ListTopicPermissions(ctx)
	require.NoError(t, err)
	require.Len(t, tps, 1)

	// Deleting the vhost deletes its settings.
	require.NoError(t, b.Admin().DeleteVHost(ctx, "v"))
	limits, err := b.Admin().ListVHostLimits(ctx)
	require.NoError(t, err)
	require.Empty(t, limits)
	tps, err = b.Admin().ListTopicPermissions(ctx)
	require.NoError(t, err)
	require.Empty(t, tps)
}
