package multiraft

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
)

// linkNet is a Link per member in one process: Send hands a copy of the
// message to the receiver's Deliver.
type linkNet struct {
	mu  sync.Mutex
	trs map[uint64]*LinkTransport
}

type netLink struct {
	n    *linkNet
	self uint64
}

func (l netLink) Send(to uint64, data []byte) error {
	l.n.mu.Lock()
	dst := l.n.trs[to]
	l.n.mu.Unlock()
	if dst == nil {
		return fmt.Errorf("no member %d", to)
	}
	return dst.Deliver(l.self, append([]byte(nil), data...))
}

func (l netLink) Members() []uint64 {
	l.n.mu.Lock()
	defer l.n.mu.Unlock()
	var ids []uint64
	for id := range l.n.trs {
		ids = append(ids, id)
	}
	return ids
}

// TestLinkTransportCommits runs three engines whose frames go over a
// Link, as package cluster runs them over the members' messages: groups
// elect and commit, and a malformed message is refused.
func TestLinkTransportCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := &linkNet{trs: map[uint64]*LinkTransport{}}
	for id := uint64(1); id <= 3; id++ {
		n.trs[id] = NewLinkTransport(id, netLink{n: n, self: id}, nil)
	}
	c := &testCluster{t: t, members: map[uint64]*testMember{}}
	base := t.TempDir()
	for id := uint64(1); id <= 3; id++ {
		m := &testMember{id: id, dir: fmt.Sprintf("%s/%d", base, id)}
		c.members[id] = m
		c.startWith(m, n.trs[id])
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			require.NoError(t, m.e.Close())
		}
		for _, tr := range n.trs {
			tr.Close()
		}
	})
	c.createGroups(ctx, 10)
	for g := uint64(1); g <= 10; g++ {
		require.NoError(t, c.propose(ctx, g%3+1, g, []byte("x")))
	}
	for g := uint64(1); g <= 10; g++ {
		require.Eventually(t, func() bool { return c.converged(g, 1) }, 10*time.Second, 10*time.Millisecond)
	}
	require.Error(t, n.trs[1].Deliver(2, []byte{0, 0, 0, 9, 1}))
	require.Error(t, n.trs[1].Deliver(1, nil), "a message from itself")
}

// FuzzLinkDeliver feeds arbitrary messages to a LinkTransport's Deliver:
// it returns an error or delivers, never panics.
func FuzzLinkDeliver(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, framePing})
	f.Add([]byte{0, 0, 0, 9, 1})
	var fr frame
	fr.beats = []beat{{group: 1, term: 2, commit: 3}}
	b, _ := appendFrames(nil, &fr, defaultMaxFrame)
	f.Add(b)
	for _, c := range chunkSeeds(f) {
		f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(len(c))), c...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := NewLinkTransport(1, netLink{n: &linkNet{}}, nil)
		defer tr.Close()
		_ = tr.Deliver(2, data)
	})
}

// sizeLink records the size of each message sent and hands it to dst.
type sizeLink struct {
	mu    sync.Mutex
	sizes []int
	dst   *LinkTransport
}

func (l *sizeLink) Send(to uint64, data []byte) error {
	l.mu.Lock()
	l.sizes = append(l.sizes, len(data))
	l.mu.Unlock()
	return l.dst.Deliver(2, append([]byte(nil), data...))
}

func (l *sizeLink) Members() []uint64 { return []uint64{1, 2} }

// TestLinkTransportChunks sends a snapshot message larger than the frame
// limit over a Link: it goes as chunks, in messages within the limit,
// and the receiver gets every chunk in order.
func TestLinkTransportChunks(t *testing.T) {
	const max = 64 << 10
	rx := NewLinkTransport(1, &sizeLink{}, nil)
	defer rx.Close()
	rx.max = max
	link := &sizeLink{dst: rx}
	tx := NewLinkTransport(2, link, nil)
	defer tx.Close()
	tx.max = max
	data := make([]byte, 5*max)
	for i := range data {
		data[i] = byte(i * 7)
	}
	done := make(chan bool, 1)
	require.True(t, tx.send(1, &frame{msgs: []groupMsg{{group: 9, msg: snapMsg(12, data)}}}, func(ok bool) { done <- ok }))
	require.True(t, <-done)
	s := newSnapStaging(1<<30, time.Minute)
	var whole *raftpb.Message
	for whole == nil {
		in := <-rx.receive()
		require.NotNil(t, in.f.chunk)
		m, err := s.add(in.from, in.f.chunk, time.Now())
		require.NoError(t, err)
		whole = m
	}
	require.Equal(t, data, whole.GetSnapshot().GetData())
	link.mu.Lock()
	defer link.mu.Unlock()
	require.Greater(t, len(link.sizes), 1)
	for _, n := range link.sizes {
		require.LessOrEqual(t, n, max)
	}
}
