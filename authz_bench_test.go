package broker_test

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/brokertest"
)

// BenchmarkThroughputAuth is BenchmarkThroughput's pipe door (publish,
// consume and ack one 128-byte message per op) with the permission checks
// decided three ways: by the user database without Options.Auth
// ("no-chain"), by the user database as the chain's auth.Internal entry
// ("internal", which must cost the same: no chain call per message), and
// by a Go hook's Authorizer that the connection asks through its cache of
// allowed decisions ("hook").
func BenchmarkThroughputAuth(b *testing.B) {
	guest := auth.Funcs{Login: func(ctx context.Context, req auth.Request) (auth.Identity, error) {
		if req.User == "guest" && req.Secret == "guest" {
			return auth.Identity{User: "guest"}, nil
		}
		return auth.Identity{}, auth.Refuse("not guest")
	}}
	for _, bc := range []struct {
		name  string
		chain auth.Chain
	}{
		{"no-chain", nil},
		{"internal", auth.Chain{auth.Internal}},
		{"hook", auth.Hook(guest)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			br := brokertest.NewUnstarted(b, broker.Options{Auth: bc.chain})
			brokertest.Start(b, br)
			conn, err := amqp091.DialConfig(br.URL(), amqp091.Config{Dial: br.Dial})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = conn.Close() })
			pub, sub := benchAMQPChannel(b, conn), benchAMQPChannel(b, conn)
			if _, err := pub.QueueDeclare("bench", false, false, false, false, nil); err != nil {
				b.Fatal(err)
			}
			if err := sub.Qos(256, 0, false); err != nil {
				b.Fatal(err)
			}
			msgs, err := sub.Consume("bench", "", false, false, false, false, nil)
			if err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 128)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			publishAndAck(b, pub, msgs, body)
		})
	}
}
