package broker

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/sharedtest"
	"github.com/warrenmq/broker/meta"
)

// BenchmarkFollowerApply is the follower's cost per change from the feed:
// the callback's append, the batch hand-over, the queue lookup and the
// actor's Observe. Appends to different shards do not coalesce.
func BenchmarkFollowerApply(b *testing.B) {
	s := sharedtest.New()
	br, err := New(Options{Storage: StorageOptions{Meta: s.Meta, Shards: s.Shards, Unacked: s.Index}, Node: "bench"})
	require.NoError(b, err)
	defer br.Close()
	conn, err := amqp091.DialConfig(br.URL(), amqp091.Config{Dial: br.Dial})
	require.NoError(b, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(b, err)
	for _, name := range []string{"q", "r"} {
		_, err = ch.QueueDeclare(name, true, false, false, false, nil)
		require.NoError(b, err)
	}
	br.stopFollowing() // the benchmark is the follower
	f := br.follow
	ctx := context.Background()
	const batch = 64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		for j := range batch {
			shard := "/\x00q"
			if j%2 == 1 {
				shard = "/\x00r"
			}
			f.Add(meta.Change{Kind: meta.ChangeAppended, Shard: shard, Offset: uint64(i + j)})
		}
		f.ApplyPending(ctx, followTarget{br})
	}
}
