package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta/raft"
	"github.com/warrenmq/broker/storage"
)

// TestReplyCodec round-trips each kind of the router's messages and
// refuses truncated and malformed ones.
func TestReplyCodec(t *testing.T) {
	long := string(bytes.Repeat([]byte("n"), 255))
	tests := []struct {
		name string
		data []byte
		want replyMsg
	}{
		{"reply", encodeReply(kindReply, 7, "/", "amq.rabbitmq.reply-to.2.x", []byte{0x02, 0x00}, []byte("body")),
			replyMsg{kind: kindReply, id: 7, vhost: "/", name: "amq.rabbitmq.reply-to.2.x", props: []byte{0x02, 0x00}, body: []byte("body")}},
		{"reply without answer, empty props and body", encodeReply(kindReply, 0, long, long, nil, nil),
			replyMsg{kind: kindReply, vhost: long, name: long, props: []byte{}, body: []byte{}}},
		{"probe", encodeReply(kindProbe, 9, "v", "n", nil, nil), replyMsg{kind: kindProbe, id: 9, vhost: "v", name: "n"}},
		{"answer yes", encodeAnswer(3, true), replyMsg{kind: kindAnswer, id: 3, yes: true}},
		{"answer no", encodeAnswer(4, false), replyMsg{kind: kindAnswer, id: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeReply(tt.data)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			// A reply's body is the rest: only what comes before it
			// can be cut short.
			for n := range len(tt.data) - len(tt.want.body) {
				_, err := decodeReply(tt.data[:n])
				require.ErrorIs(t, err, errMalformed, "truncated to %d bytes", n)
			}
		})
	}
	for _, bad := range [][]byte{
		append(encodeAnswer(1, true)[:9], 2),                              // answer neither 0 nor 1
		append(encodeReply(kindProbe, 1, "v", "n", nil, nil), 0),          // trailing byte
		append([]byte{9}, make([]byte, 12)...),                            // unknown kind
		{kindReply, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, // props longer than the rest
	} {
		_, err := decodeReply(bad)
		require.ErrorIs(t, err, errMalformed, "%x", bad)
	}
}

// FuzzDecodeReply feeds arbitrary member messages to the decoder: it
// never panics, and what it accepts encodes back to the same bytes.
func FuzzDecodeReply(f *testing.F) {
	f.Add(encodeReply(kindReply, 7, "/", "amq.rabbitmq.reply-to.2.x", []byte{0x02, 0x00}, []byte("body")))
	f.Add(encodeReply(kindProbe, 9, "v", "n", nil, nil))
	f.Add(encodeAnswer(3, true))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeReply(b)
		if err != nil {
			return
		}
		var again []byte
		if m.kind == kindAnswer {
			again = encodeAnswer(m.id, m.yes)
		} else {
			again = encodeReply(m.kind, m.id, m.vhost, m.name, m.props, m.body)
		}
		require.Equal(t, b, again)
	})
}

// stuckMessenger never delivers: SendMessages blocks until its context
// ends, as a write to a member that stopped reading does.
type stuckMessenger struct{ in chan raft.Message }

func (s stuckMessenger) SendMessages(ctx context.Context, _ []raft.Message) error {
	<-ctx.Done()
	return ctx.Err()
}
func (s stuckMessenger) Messages() <-chan raft.Message { return s.in }

// TestReplyQueueBounded floods a member that does not read with replies:
// the queue holds at most maxReplyQueueMsgs (and maxReplyQueueBytes), the
// rest are refused at once (a mandatory one is then returned), and a
// reply that waits for an answer gives up after the timeout.
func TestReplyQueueBounded(t *testing.T) {
	r := startReplyRouter(&replyRouter{
		msgr: stuckMessenger{in: make(chan raft.Message)}, self: 1, timeout: 50 * time.Millisecond,
		log:     slog.New(slog.DiscardHandler),
		members: func(context.Context) ([]raft.Peer, error) { return []raft.Peer{{ID: 1}, {ID: 2}}, nil },
	}, []raft.Peer{{ID: 1}, {ID: 2}})
	defer r.close()

	require.False(t, r.ForwardReply("/", "3", "amq.rabbitmq.reply-to.3.x", nil, nil, false), "not a member")
	require.False(t, r.ForwardReply("/", "1", "amq.rabbitmq.reply-to.1.x", nil, nil, false), "this member itself")
	require.False(t, r.ForwardReply("/", "two", "amq.rabbitmq.reply-to.two.x", nil, nil, false), "not a raft id")

	accepted := 0
	for range 3 * maxReplyQueueMsgs {
		if r.ForwardReply("/", "2", "amq.rabbitmq.reply-to.2.x", nil, []byte("reply"), false) {
			accepted++
		}
	}
	// One batch may have left the queue for the stuck sender.
	require.LessOrEqual(t, accepted, 2*maxReplyQueueMsgs)
	require.GreaterOrEqual(t, accepted, maxReplyQueueMsgs)

	start := time.Now()
	require.False(t, r.ForwardReply("/", "2", "amq.rabbitmq.reply-to.2.x", nil, []byte("mandatory"), true), "a full queue: unroutable at once")
	require.Less(t, time.Since(start), time.Second)

	// Bytes: a fresh member's queue takes one large reply, and then no
	// more than maxReplyQueueBytes.
	r.mu.Lock()
	r.isMember[4] = true
	r.mu.Unlock()
	big := make([]byte, maxReplyQueueBytes/4)
	n := 0
	for range 16 {
		if r.ForwardReply("/", "4", "amq.rabbitmq.reply-to.4.x", nil, big, false) {
			n++
		}
	}
	require.LessOrEqual(t, n*len(big), 2*maxReplyQueueBytes)

	// A member that does not answer: false once the timeout passed.
	r.mu.Lock()
	r.isMember[5] = true
	r.mu.Unlock()
	start = time.Now()
	require.False(t, r.ReplyExists("/", "5", "amq.rabbitmq.reply-to.5.x"))
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
}

// TestReplyQueueCounted: what the queues of replies for other members hold
// is counted for the broker's memory alarm (MemoryBytes), the batch the
// stuck transport holds included, until the router lets go of it.
func TestReplyQueueCounted(t *testing.T) {
	r := startReplyRouter(&replyRouter{
		msgr: stuckMessenger{in: make(chan raft.Message)}, self: 1, timeout: 50 * time.Millisecond,
		log:     slog.New(slog.DiscardHandler),
		members: func(context.Context) ([]raft.Peer, error) { return []raft.Peer{{ID: 1}, {ID: 2}}, nil },
	}, []raft.Peer{{ID: 1}, {ID: 2}})
	var _ storage.MemoryReporter = r
	body := make([]byte, 1000)
	want := 0
	for range 100 {
		require.True(t, r.ForwardReply("/", "2", "amq.rabbitmq.reply-to.2.x", nil, body, false))
		want += len(encodeReply(kindReply, 0, "/", "amq.rabbitmq.reply-to.2.x", nil, body))
	}
	require.EqualValues(t, want, r.MemoryBytes())
	r.close()
	require.Zero(t, r.MemoryBytes(), "dropped with the router")
}

// recordingMessenger delivers what the test puts in in and records what
// the router sends.
type recordingMessenger struct {
	in   chan raft.Message
	sent chan raft.Message
}

func (m recordingMessenger) SendMessages(_ context.Context, msgs []raft.Message) error {
	for _, msg := range msgs {
		m.sent <- msg
	}
	return nil
}
func (m recordingMessenger) Messages() <-chan raft.Message { return m.in }

// TestReplyRouterDropsNonMembers: an answer from an id that is not a
// member does not resolve a member's pending question; the member's own
// answer does.
func TestReplyRouterDropsNonMembers(t *testing.T) {
	msgr := recordingMessenger{in: make(chan raft.Message, 2), sent: make(chan raft.Message, 2)}
	r := startReplyRouter(&replyRouter{
		msgr: msgr, self: 1, timeout: 30 * time.Second,
		log:     slog.New(slog.DiscardHandler),
		members: func(context.Context) ([]raft.Peer, error) { return []raft.Peer{{ID: 1}, {ID: 2}}, nil },
	}, []raft.Peer{{ID: 1}, {ID: 2}})
	defer r.close()
	got := make(chan bool, 1)
	go func() { got <- r.ReplyExists("/", "2", "amq.rabbitmq.reply-to.2.x") }()
	probe := <-msgr.sent
	_, id, ok := requestID(probe.Data)
	require.True(t, ok)
	msgr.in <- raft.Message{From: 7, To: 1, Data: encodeAnswer(id, true)}
	msgr.in <- raft.Message{From: 2, To: 1, Data: encodeAnswer(id, false)}
	require.False(t, <-got, "the member's answer, not the outsider's")
}
