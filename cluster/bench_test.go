package cluster_test

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// BenchmarkPersistentConfirm publishes persistent 12-byte messages to a
// durable queue with publisher confirms (a window of 256, as perftest's
// persistent-confirm scenario), through the broker's in-memory Dial: on a
// single node with Pebble in DataDir, and on the leader and on a follower
// of a three-node cluster, where a confirm waits for a majority to have the
// message synced (a follower forwards its proposals to the leader).
func BenchmarkPersistentConfirm(b *testing.B) {
	b.Run("single-node", func(b *testing.B) {
		br, err := broker.New(broker.Options{DataDir: b.TempDir()})
		require.NoError(b, err)
		defer br.Close()
		benchConfirms(b, br)
	})
	b.Run("3-nodes-leader", func(b *testing.B) {
		c := newTestCluster(b)
		benchConfirms(b, c.broker(c.leader()))
	})
	b.Run("3-nodes-follower", func(b *testing.B) {
		c := newTestCluster(b)
		benchConfirms(b, c.broker((c.leader()+1)%3))
	})
}

func benchConfirms(b *testing.B, br *broker.Broker) {
	conn, err := amqp091.DialConfig(br.URL(), amqp091.Config{Dial: br.Dial})
	require.NoError(b, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(b, err)
	_, err = ch.QueueDeclare("bench", true, false, false, false, nil)
	require.NoError(b, err)
	require.NoError(b, ch.Confirm(false))
	const window = 256
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, window))
	msg := amqp091.Publishing{Body: make([]byte, 12), DeliveryMode: amqp091.Persistent}
	b.ReportAllocs()
	b.ResetTimer()
	outstanding := 0
	for range b.N {
		if outstanding == window {
			require.True(b, (<-confirms).Ack)
			outstanding--
		}
		require.NoError(b, ch.PublishWithContext(context.Background(), "", "bench", false, false, msg))
		outstanding++
	}
	for ; outstanding > 0; outstanding-- {
		require.True(b, (<-confirms).Ack)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "confirmed/s")
	_, err = ch.QueueDelete("bench", false, false, false)
	require.NoError(b, err)
}

// BenchmarkReplyTo publishes direct reply-to replies (12 bytes) to a
// requester on node 1, from node 1 itself and from node 2, through the
// brokers' in-memory Dial: "mandatory" publishes one at a time, mandatory
// with confirms, so each waits for the requester's node to answer (a
// round trip between members when they differ); "window" keeps up to 64
// non-mandatory replies unreceived, each confirmed before the next is
// published (a confirm that waits for nothing: the responder's node
// confirms a forwarded reply as soon as it is queued for the requester's).
func BenchmarkReplyTo(b *testing.B) {
	c := newTestCluster(b)
	_, ch := c.dialNode(0, "requester")
	req := newRequester(b, ch)
	c.rpcQueue(ch, 1, "rpc")
	for _, from := range []int{0, 1} {
		_, rch := c.dialNode(from, "responder")
		requests, err := rch.Consume("rpc", "bench", true, false, false, false, nil)
		require.NoError(b, err)
		req.request(b, "rpc", "name")
		name := amqptest.Next(b, requests).ReplyTo
		require.NoError(b, rch.Cancel("bench", false))
		resp := newResponder(b, rch)
		msg := amqp091.Publishing{Body: make([]byte, 12)}
		where := "same-node"
		if from != 0 {
			where = "other-node"
		}
		b.Run(where+"/mandatory", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				require.NoError(b, rch.PublishWithContext(context.Background(), "", name, true, false, msg))
				require.True(b, (<-resp.confirms).Ack)
				<-req.replies
			}
			require.Empty(b, resp.returns)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "replies/s")
		})
		b.Run(where+"/window", func(b *testing.B) {
			const window = 64
			b.ReportAllocs()
			inFlight := 0
			for range b.N {
				if inFlight == window {
					<-req.replies
					inFlight--
				}
				require.NoError(b, rch.PublishWithContext(context.Background(), "", name, false, false, msg))
				<-resp.confirms
				inFlight++
			}
			for ; inFlight > 0; inFlight-- {
				<-req.replies
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "replies/s")
		})
	}
}
