package delayed

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/meta"
)

// memRecords is meta.Records in memory: what one replica of a shared store
// does, for the claim rules' tests (the cluster package tests the real
// one across nodes).
type memRecords struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (r *memRecords) UpdateRecords(_ context.Context, u meta.RecordUpdate) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range u.Present {
		if _, ok := r.m[string(k)]; !ok {
			return false, nil
		}
	}
	for _, c := range u.Match {
		v, ok := r.m[string(c.Key)]
		if ok != (c.Value != nil) || ok && !bytes.Equal(v, c.Value) {
			return false, nil
		}
	}
	for _, s := range u.Set {
		r.m[string(s.Key)] = bytes.Clone(s.Value)
	}
	for _, k := range u.Delete {
		delete(r.m, string(k))
	}
	for _, a := range u.Add {
		var n int64
		if v, ok := r.m[string(a.Key)]; ok {
			n = int64(binary.BigEndian.Uint64(v))
		}
		if n += a.Delta; n == 0 {
			delete(r.m, string(a.Key))
		} else {
			r.m[string(a.Key)] = binary.BigEndian.AppendUint64(nil, uint64(n))
		}
	}
	return true, nil
}

func (r *memRecords) ScanRecords(prefix, start []byte, fn func(k, v []byte) bool) error {
	r.mu.Lock()
	var keys []string
	for k := range r.m {
		if bytes.HasPrefix([]byte(k), prefix) && k >= string(start) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i] = r.m[k]
	}
	r.mu.Unlock()
	for i, k := range keys {
		if !fn([]byte(k), vals[i]) {
			break
		}
	}
	return nil
}

func keysOf(msgs []Message) []Key {
	out := make([]Key, len(msgs))
	for i, m := range msgs {
		out[i] = m.Key
	}
	return out
}

// The meta leader claims due messages; another broker routes none of them
// while the claimer lives, takes over its claims once it is dead, and a
// broker that restarts takes back its own.
func TestReplicatedClaims(t *testing.T) {
	ctx := context.Background()
	rs := &memRecords{m: map[string][]byte{}}
	fc := clock.NewFake(time.Unix(1_800_000_000, 0))
	leader := "a"
	dead := map[string]bool{}
	open := func(node string) *Replicated {
		s, err := OpenReplicated(ctx, rs, Cluster{
			Node: node, Clock: fc,
			Leader: func() bool { return leader == node },
			Alive:  func(n string) bool { return !dead[n] },
		})
		require.NoError(t, err)
		return s
	}
	a, b := open("a"), open("b")
	require.NotEqual(t, a.LastSeq(), b.LastSeq(), "brokers' sequence numbers differ")

	now := fc.Now().UnixNano()
	var msgs []Message
	for i := range 3 {
		msgs = append(msgs, Message{Key: Key{Due: now + int64(i), Seq: a.LastSeq() + uint64(i) + 1}, VHost: "/", Exchange: "dx", Body: []byte{byte(i)}})
	}
	require.NoError(t, a.Put(ctx, msgs, true))
	require.Error(t, b.Put(ctx, msgs[:1], true), "a held key is not overwritten")
	require.EqualValues(t, 3, b.Count("/", "dx"))
	require.EqualValues(t, 3, b.Len())

	got, err := b.Due(ctx, now+10, 10)
	require.NoError(t, err)
	require.Empty(t, got, "not the leader: claims nothing")
	k, ok, err := b.Next(ctx, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, fc.Now().Add(leaderPoll).UnixNano(), k.Due, "looks again whether it leads")

	got, err = a.Due(ctx, now+1, 10)
	require.NoError(t, err)
	require.Equal(t, keysOf(msgs[:2]), keysOf(got), "the leader claims what is due")

	leader = "b"
	got, err = b.Due(ctx, now+10, 10)
	require.NoError(t, err)
	require.Equal(t, keysOf(msgs[2:]), keysOf(got), "the new leader leaves a live broker's claims")
	got, err = a.Due(ctx, now+10, 10)
	require.NoError(t, err)
	require.Equal(t, keysOf(msgs[:2]), keysOf(got), "a broker routes what it claimed, leader or not")

	dead["a"] = true
	got, err = b.Due(ctx, now+10, 10)
	require.NoError(t, err)
	require.Equal(t, keysOf(msgs), keysOf(got), "a dead broker's claims are taken over")
	require.NoError(t, b.Delete(ctx, got[:1]))
	require.NoError(t, b.Delete(ctx, got[:2]), "one already gone: the others still go")
	require.EqualValues(t, 1, a.Count("/", "dx"))

	// b restarts: its claim is released, and the leader claims it again.
	dead["a"] = false
	leader = "a"
	b = open("b")
	got, err = a.Due(ctx, now+10, 10)
	require.NoError(t, err)
	require.Equal(t, keysOf(msgs[2:]), keysOf(got))
	n, err := b.DeleteExchange(ctx, "/", "dx")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, a.Len())
	require.Empty(t, rs.m, "nothing left behind")
}
