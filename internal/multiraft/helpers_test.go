package multiraft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// logSM is a state machine that keeps every command it applied, in order,
// on disk under its ordinal (and in memory, for the tests to compare),
// and answers each with its index.
type logSM struct {
	mu      sync.Mutex
	cmds    [][]byte
	pending [][]byte // applied, not committed yet
	data    *Data
}

func ordinalKey(n int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

func (s *logSM) Load(d *Data) error {
	var cmds [][]byte
	err := d.Scan(nil, nil, func(k, v []byte) bool {
		cmds = append(cmds, bytes.Clone(v))
		return true
	})
	s.mu.Lock()
	s.cmds, s.pending, s.data = cmds, nil, d
	s.mu.Unlock()
	return err
}

func (s *logSM) Apply(b *Batch, index uint64, cmd []byte) []byte {
	s.mu.Lock()
	n := len(s.cmds) + len(s.pending)
	s.pending = append(s.pending, bytes.Clone(cmd))
	s.mu.Unlock()
	if err := b.Set(ordinalKey(n), cmd); err != nil {
		panic(err)
	}
	return binary.BigEndian.AppendUint64(nil, index)
}

func (s *logSM) Committed() {
	s.mu.Lock()
	s.cmds = append(s.cmds, s.pending...)
	s.pending = nil
	s.mu.Unlock()
}

func (s *logSM) Snapshot(w io.Writer) error {
	var b []byte
	err := s.data.Scan(nil, nil, func(_, v []byte) bool {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
		return true
	})
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func (s *logSM) Restore(w *Batch, b []byte) error {
	for n := 0; len(b) > 0; n++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < l {
			return fmt.Errorf("bad snapshot")
		}
		if err := w.Set(ordinalKey(n), b[k:k+int(l)]); err != nil {
			return err
		}
		b = b[k+int(l):]
	}
	return nil
}

func (s *logSM) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cmds)
}

// testMember is one engine of a testCluster with its state machines.
type testMember struct {
	id  uint64
	dir string
	e   *Engine
	mu  sync.Mutex
	sms map[uint64]*logSM
}

func (m *testMember) sm(group uint64) *logSM {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sms[group]
}

// testCluster is engines on a MemNetwork, or over TCP on loopback
// (newTCPCluster), with fast ticks.
type testCluster struct {
	t       testing.TB
	net     *MemNetwork
	members map[uint64]*testMember
	cfg     func(*Config)
	// Over TCP: each member's address and live transport.
	addrs    map[uint64]string
	tcps     map[uint64]*TCPTransport
	maxFrame int // TCPConfig.MaxFrameBytes; 0: the default
}

var testSecret = []byte("multiraft test cluster secret 32")

// testTick is the tests' raft tick: an election timeout of 10 ticks is
// half a second, short enough for failover tests and long enough for
// 1,000 groups under the race detector on a shared machine.
const testTick = 50 * time.Millisecond

func newTestCluster(t testing.TB, n int, cfg func(*Config)) *testCluster {
	c := &testCluster{t: t, net: NewMemNetwork(), members: map[uint64]*testMember{}, cfg: cfg}
	base := t.TempDir()
	for i := 1; i <= n; i++ {
		m := &testMember{id: uint64(i), dir: filepath.Join(base, fmt.Sprint(i))}
		c.members[m.id] = m
	}
	// Every member's transport first, so each engine knows all peers.
	trs := map[uint64]Transport{}
	for id := range c.members {
		trs[id] = c.net.Transport(id)
	}
	for id, m := range c.members {
		c.startWith(m, trs[id])
	}
	t.Cleanup(c.close)
	return c
}

// newTCPCluster is newTestCluster over TCP on loopback, members
// authenticated with testSecret.
func newTCPCluster(t testing.TB, n int, cfg func(*Config)) *testCluster {
	return newTCPClusterMax(t, n, 0, cfg)
}

// newTCPClusterMax is newTCPCluster with a frame limit of maxFrame.
func newTCPClusterMax(t testing.TB, n, maxFrame int, cfg func(*Config)) *testCluster {
	c := &testCluster{t: t, members: map[uint64]*testMember{}, cfg: cfg, addrs: map[uint64]string{}, tcps: map[uint64]*TCPTransport{}, maxFrame: maxFrame}
	base := t.TempDir()
	ls := map[uint64]net.Listener{}
	for i := 1; i <= n; i++ {
		id := uint64(i)
		c.members[id] = &testMember{id: id, dir: filepath.Join(base, fmt.Sprint(i))}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls[id], c.addrs[id] = l, l.Addr().String()
	}
	t.Cleanup(c.close)
	for id, m := range c.members {
		c.startWith(m, c.newTCP(id, ls[id]))
	}
	return c
}

func (c *testCluster) newTCP(id uint64, l net.Listener) Transport {
	if l == nil {
		var err error
		for range 50 { // the port of the member's previous life
			if l, err = net.Listen("tcp", c.addrs[id]); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		require.NoError(c.t, err)
	}
	peers := map[uint64]string{}
	for pid, a := range c.addrs {
		if pid != id {
			peers[pid] = a
		}
	}
	tr, err := NewTCP(TCPConfig{ID: id, Listener: l, Peers: peers, Secret: testSecret,
		MaxFrameBytes: c.maxFrame, HandshakeTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(c.t, err)
	c.tcps[id] = tr
	return tr
}

func (c *testCluster) startWith(m *testMember, tr Transport) {
	m.sms = map[uint64]*logSM{}
	cfg := Config{
		ID: m.id, Dir: m.dir, Transport: tr, TickInterval: testTick,
		NewStateMachine: func(g uint64) StateMachine {
			sm := &logSM{}
			m.mu.Lock()
			m.sms[g] = sm
			m.mu.Unlock()
			return sm
		},
	}
	if c.cfg != nil {
		c.cfg(&cfg)
	}
	e, err := New(cfg)
	require.NoError(c.t, err)
	m.e = e
}

// kill stops member id's engine and takes it off the network.
func (c *testCluster) kill(id uint64) {
	m := c.members[id]
	if c.net != nil {
		c.net.Remove(id)
	} else {
		require.NoError(c.t, c.tcps[id].Close())
		delete(c.tcps, id)
	}
	require.NoError(c.t, m.e.Close())
	m.e = nil
}

// restart starts member id again on its directory.
func (c *testCluster) restart(id uint64) {
	if c.net != nil {
		c.startWith(c.members[id], c.net.Transport(id))
	} else {
		c.startWith(c.members[id], c.newTCP(id, nil))
	}
}

func (c *testCluster) close() {
	for _, m := range c.members {
		if m.e != nil {
			m.e.Close()
			m.e = nil
		}
	}
	if c.net != nil {
		c.net.Close()
	}
	for id, tr := range c.tcps {
		tr.Close()
		delete(c.tcps, id)
	}
}

func (c *testCluster) ids() []uint64 {
	var ids []uint64
	for id := 1; id <= len(c.members); id++ {
		ids = append(ids, uint64(id))
	}
	return ids
}

// createGroups creates groups 1..n on every member, and has group g's
// first leader be member ids[g % len]: leaders spread evenly.
func (c *testCluster) createGroups(ctx context.Context, n int) {
	ids := c.ids()
	// Groups in parallel (concurrent creations share the engines'
	// fsyncs), each campaigned as soon as its replicas exist, before
	// their election timeouts start elections of their own.
	var eg errgroup.Group
	eg.SetLimit(128)
	for g := uint64(1); g <= uint64(n); g++ {
		eg.Go(func() error {
			for _, id := range ids {
				if err := c.members[id].e.CreateGroup(ctx, g, ids); err != nil {
					return err
				}
			}
			return c.members[ids[g%uint64(len(ids))]].e.Campaign(ctx, g)
		})
	}
	require.NoError(c.t, eg.Wait())
}

// leader returns group g's leader as member from sees it, waiting for one.
func (c *testCluster) leader(ctx context.Context, from, g uint64) uint64 {
	for {
		st, err := c.members[from].e.Status(ctx, g)
		require.NoError(c.t, err)
		if st.Leader != 0 {
			return st.Leader
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("group %d: no leader seen from %d", g, from)
		case <-time.After(testTick):
		}
	}
}

// propose proposes cmd in group g through member via until it commits.
// It retries while the group has no leader (the command was not
// committed) and after a proposal timed out: a proposal forwarded to a
// leader that lost its leadership is dropped, as etcd raft drops it, so
// the command may then commit twice; the tests compare replicas, not
// counts.
func (c *testCluster) propose(ctx context.Context, via, g uint64, cmd []byte) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := c.members[via].e.Propose(pctx, g, cmd)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, ErrNoLeader) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrLeaderChanged) && !errors.Is(err, ErrProposalLost) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(testTick):
		}
	}
}

// converged reports whether every live replica's state machine of group
// g holds the same commands, at least want of them.
func (c *testCluster) converged(g uint64, want int) bool {
	var ref [][]byte
	first := true
	for _, m := range c.members {
		if m.e == nil {
			continue
		}
		sm := m.sm(g)
		if sm == nil {
			continue // not a replica of g
		}
		sm.mu.Lock()
		cmds := slices.Clone(sm.cmds)
		sm.mu.Unlock()
		if len(cmds) < want {
			return false
		}
		if first {
			ref, first = cmds, false
			continue
		}
		if len(cmds) != len(ref) {
			return false
		}
		for i := range cmds {
			if string(cmds[i]) != string(ref[i]) {
				c.t.Fatalf("group %d: members diverge at command %d: %q and %q", g, i, ref[i], cmds[i])
			}
		}
	}
	return true
}
