package raft_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta/raft"
)

// TestMessenger sends Messages both ways between two transports, over TCP
// (cluster secret and mutual TLS) and the in-memory network: they arrive in order
// with the sender's id, and a dropped link drops them.
func TestMessenger(t *testing.T) {
	type pair struct {
		a, b raft.Messenger
		drop func() // drops everything from a to b, nil when it cannot
	}
	tcp := func(withTLS bool) func(t *testing.T) pair {
		return func(t *testing.T) pair {
			var cfgs [2]raft.TCPConfig
			lns := [2]net.Listener{}
			for i := range lns {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				lns[i] = l
			}
			var trs [2]*raft.TCPTransport
			for i := range trs {
				cfgs[i] = raft.TCPConfig{ID: uint64(i + 1), Listener: lns[i], Peers: map[uint64]string{uint64(2 - i): lns[1-i].Addr().String()}}
				if !withTLS {
					cfgs[i].Secret = testSecret
				}
			}
			if withTLS {
				// Both ends must trust one CA.
				s, c := testTLS(t)
				for i := range cfgs {
					cfgs[i].ServerTLS, cfgs[i].ClientTLS = s, c
				}
			}
			for i := range trs {
				tr, err := raft.NewTCPTransport(cfgs[i])
				require.NoError(t, err)
				trs[i] = tr
				t.Cleanup(func() { require.NoError(t, tr.Close()) })
			}
			return pair{a: trs[0], b: trs[1]}
		}
	}
	tests := []struct {
		name string
		mk   func(t *testing.T) pair
	}{
		{"tcp", tcp(false)},
		{"tls", tcp(true)},
		{"memory", func(t *testing.T) pair {
			n := raft.NewNetwork()
			t.Cleanup(n.Close)
			return pair{a: n.Transport(1), b: n.Transport(2), drop: func() { n.SetLink(1, 2, raft.Link{Drop: true}) }}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.mk(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var msgs []raft.Message
			for i := range 50 {
				msgs = append(msgs, raft.Message{To: 2, Data: []byte{byte(i)}})
			}
			msgs = append(msgs, raft.Message{To: 2}) // empty data is fine
			require.NoError(t, p.a.SendMessages(ctx, msgs))
			for i := range 51 {
				select {
				case m := <-p.b.Messages():
					require.Equal(t, uint64(1), m.From)
					if i == 50 {
						require.Empty(t, m.Data)
					} else {
						require.Equal(t, []byte{byte(i)}, m.Data)
					}
				case <-ctx.Done():
					t.Fatalf("message %d did not arrive", i)
				}
			}
			require.NoError(t, p.b.SendMessages(ctx, []raft.Message{{To: 1, Data: []byte("back")}}))
			select {
			case m := <-p.a.Messages():
				require.Equal(t, raft.Message{From: 2, To: 1, Data: []byte("back")}, m)
			case <-ctx.Done():
				t.Fatal("answer did not arrive")
			}
			require.Error(t, p.a.SendMessages(ctx, []raft.Message{{To: 9, Data: []byte("x")}}), "an unknown peer")
			if p.drop != nil {
				p.drop()
				require.NoError(t, p.a.SendMessages(ctx, []raft.Message{{To: 2, Data: []byte("lost")}}))
				select {
				case m := <-p.b.Messages():
					t.Fatalf("dropped link delivered %q", m.Data)
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
}
