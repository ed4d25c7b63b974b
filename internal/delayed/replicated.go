package delayed

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/meta"
)

// Record layout of the Replicated store in a shared store's records
// (meta.Records; first byte 'd', as in Pebble):
//
//	'd' 't' due(8) seq(8)                      -> encoded Message (held)
//	'd' 'c' due(8) seq(8)                      -> node name (claimed: being routed by that node)
//	'd' 'x' lp(vhost) lp(exchange) due(8) seq(8) -> empty
//	'd' 'n' lp(vhost) lp(exchange)             -> count (8-byte counter)
//	'd' 'N'                                    -> count of all held (8-byte counter)
const (
	kindClaim  = 'c'
	kindCount  = 'n'
	kindTotal  = 'N'
	seqTagBits = 16
	seqTagAt   = 64 - seqTagBits
)

func claimKey(k Key) []byte { return appendKey([]byte{keyPrefix, kindClaim}, k) }

func countKey(vhost, exchange string) []byte {
	p := exchangePrefix(vhost, exchange)
	p[1] = kindCount
	return p
}

var totalKey = []byte{keyPrefix, kindTotal}

// parseTimeKey reads a held message's key from its record key.
func parseTimeKey(k []byte) (Key, bool) {
	if len(k) != 18 || k[0] != keyPrefix || k[1] != kindByTime {
		return Key{}, false
	}
	return parseKey(k[2:])
}

// Cluster is what a Replicated store needs to know of the brokers sharing
// it.
type Cluster struct {
	// Node is this broker's name (Options.Node): it marks its claims.
	Node string
	// Leader reports whether this broker claims due messages: the meta
	// leader's (meta.Store.IsLeader).
	Leader func() bool
	// Alive reports whether the broker named node runs
	// (the peers package cluster attaches); nil counts every broker alive. The claims of
	// one that does not are taken over.
	Alive func(node string) bool
	// Clock is the broker's clock (Options.Clock).
	Clock clock.Clock
}

// Replicated is a Store in the records of a store that several brokers
// share (meta.Records: a cluster's raft group), for the durable delayed
// exchanges of a cluster: a held message is replicated before its publish
// is confirmed, so it survives the broker that accepted it, and is routed
// once, by one broker.
//
// Who routes: the meta leader claims due messages, a batch at a time, with
// one conditional update (each must be held and unclaimed, or claimed by a
// broker Alive reports dead), routes them, and deletes them; of brokers
// that both believe they lead, only one claim of a message applies. A
// broker always routes what it claimed, leader or not; one that restarts
// releases the claims of its earlier run, and the leader takes over those
// of a broker that stopped. A broker that dies between routing a message
// and deleting it has it routed again (a duplicate, never a loss), as a
// single node after a crash.
//
// Reads are of the local replica (meta.Records.ScanRecords); a message
// another broker held is seen once applied here, which Service.Follow
// signals.
type Replicated struct {
	rs  meta.Records
	cl  Cluster
	tag uint64 // this broker's sequence numbers' high bits

	mu      sync.Mutex
	lastSeq uint64
}

var _ Store = (*Replicated)(nil)

// leaderPoll is how often a broker that does not lead looks whether it
// leads now while messages are held (leadership changes are not
// signalled): the lateness of a message due during a failover.
const leaderPoll = 250 * time.Millisecond

// OpenReplicated opens the store on rs. It releases the claims this
// broker's earlier run left (it stopped before routing them), and reads
// the highest sequence number it gave.
func OpenReplicated(ctx context.Context, rs meta.Records, cl Cluster) (*Replicated, error) {
	if cl.Leader == nil || cl.Clock == nil {
		return nil, errors.New("delayed: replicated store needs Leader and Clock")
	}
	h := fnv.New32a()
	h.Write([]byte(cl.Node))
	s := &Replicated{rs: rs, cl: cl, tag: uint64(h.Sum32()&(1<<seqTagBits-1)) << seqTagAt}
	s.lastSeq = s.tag
	var mine [][]byte
	err := rs.ScanRecords([]byte{keyPrefix}, nil, func(k, v []byte) bool {
		switch {
		case len(k) == 18 && k[1] == kindByTime:
			if key, ok := parseKey(k[2:]); ok && key.Seq&^(1<<seqTagAt-1) == s.tag {
				s.lastSeq = max(s.lastSeq, key.Seq)
			}
		case len(k) == 18 && k[1] == kindClaim && string(v) == cl.Node:
			mine = append(mine, bytes.Clone(k))
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("delayed: open replicated: %w", err)
	}
	for _, k := range mine {
		if _, err := rs.UpdateRecords(ctx, meta.RecordUpdate{
			Match:  []meta.Record{{Key: k, Value: []byte(cl.Node)}},
			Delete: [][]byte{k},
		}); err != nil {
			return nil, fmt.Errorf("delayed: release claims: %w", err)
		}
	}
	return s, nil
}

// Put stores msgs in one update; it fails whole if one's key is taken
// (another broker gave the same due time and sequence number: its name
// hashes to this one's sequence tag), so nothing is overwritten. sync is
// moot: the shared store's writes are durable when they return.
func (s *Replicated) Put(ctx context.Context, msgs []Message, _ bool) error {
	if len(msgs) == 0 {
		return nil
	}
	var u meta.RecordUpdate
	adds := map[string]int64{}
	for i := range msgs {
		m := &msgs[i]
		tk := timeKey(m.Key)
		u.Match = append(u.Match, meta.Record{Key: tk})
		u.Set = append(u.Set,
			meta.Record{Key: tk, Value: m.Encode(nil)},
			meta.Record{Key: exchangeKey2(m.VHost, m.Exchange, m.Key), Value: []byte{}})
		adds[string(countKey(m.VHost, m.Exchange))]++
	}
	for k, n := range adds {
		u.Add = append(u.Add, meta.Counter{Key: []byte(k), Delta: n})
	}
	u.Add = append(u.Add, meta.Counter{Key: totalKey, Delta: int64(len(msgs))})
	ok, err := s.rs.UpdateRecords(ctx, u)
	if err != nil {
		return fmt.Errorf("delayed: put: %w", err)
	}
	if !ok {
		return errors.New("delayed: put: a message with the same due time and sequence number is held")
	}
	s.mu.Lock()
	for i := range msgs {
		if msgs[i].Seq&^(1<<seqTagAt-1) == s.tag {
			s.lastSeq = max(s.lastSeq, msgs[i].Seq)
		}
	}
	s.mu.Unlock()
	return nil
}

// claims returns the claims of messages due at or before until: by key,
// the claiming broker.
func (s *Replicated) claims(until int64) (map[Key]string, error) {
	out := map[Key]string{}
	err := s.rs.ScanRecords([]byte{keyPrefix, kindClaim}, nil, func(k, v []byte) bool {
		key, ok := parseKey(k[2:])
		if !ok || key.Due > until {
			return false
		}
		out[key] = string(v)
		return true
	})
	return out, err
}

// mine reports whether this broker may route a message claimed by owner
// ("" unclaimed): its own, or, on the leader, unclaimed or a dead
// broker's.
func (s *Replicated) mine(owner string, leader bool) bool {
	switch {
	case owner == s.cl.Node:
		return true
	case !leader:
		return false
	case owner == "":
		return true
	default:
		return s.cl.Alive != nil && !s.cl.Alive(owner)
	}
}

// claimTries bounds Due's claim attempts: a lost race means another
// broker believes it leads; it routes what it claimed.
const claimTries = 3

// Due claims (on the leader) and returns up to max messages due at or
// before until that this broker is to route: those it claimed before and
// still holds (the scheduler leaves out those in flight), and, when it
// leads, unclaimed ones and those claimed by a broker that is gone.
func (s *Replicated) Due(ctx context.Context, until int64, max int) ([]Message, error) {
	for range claimTries {
		leader := s.cl.Leader()
		claims, err := s.claims(until)
		if err != nil {
			return nil, err
		}
		if !leader {
			// Only its own claims, without walking the due messages
			// the leader is to route.
			return s.get(s.own(claims, nil, max))
		}
		var out []Message
		var u meta.RecordUpdate
		var scanErr error
		err = s.rs.ScanRecords([]byte{keyPrefix, kindByTime}, nil, func(k, v []byte) bool {
			key, ok := parseKey(k[2:])
			if !ok || key.Due > until || len(out) >= max {
				return false
			}
			owner := claims[key]
			if !s.mine(owner, leader) {
				return true
			}
			m, err := Decode(v)
			if err != nil {
				scanErr = err
				return false
			}
			out = append(out, m)
			if owner != s.cl.Node {
				ck := claimKey(key)
				var was []byte
				if owner != "" {
					was = []byte(owner)
				}
				u.Present = append(u.Present, bytes.Clone(k))
				u.Match = append(u.Match, meta.Record{Key: ck, Value: was})
				u.Set = append(u.Set, meta.Record{Key: ck, Value: []byte(s.cl.Node)})
			}
			return true
		})
		if err == nil {
			err = scanErr
		}
		if err != nil {
			return nil, err
		}
		if len(u.Set) == 0 {
			return out, nil
		}
		ok, err := s.rs.UpdateRecords(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("delayed: claim: %w", err)
		}
		if ok {
			return out, nil
		}
	}
	return nil, nil
}

// Next returns the earliest message this broker is to route (see Due)
// that skip does not reject; when it does not lead and holds no claim
// while messages are held, a key due leaderPoll from now, so that it
// looks again whether it leads.
func (s *Replicated) Next(_ context.Context, skip func(Key) bool) (Key, bool, error) {
	leader := s.cl.Leader()
	claims, err := s.claims(1<<63 - 1)
	if err != nil {
		return Key{}, false, err
	}
	if !leader {
		if own := s.own(claims, skip, 1); len(own) > 0 {
			return own[0], true, nil
		}
		any := false
		err := s.rs.ScanRecords([]byte{keyPrefix, kindByTime}, nil, func(_, _ []byte) bool {
			any = true
			return false
		})
		if err != nil || !any {
			return Key{}, false, err
		}
		return Key{Due: s.cl.Clock.Now().Add(leaderPoll).UnixNano()}, true, nil
	}
	var next Key
	found := false
	err = s.rs.ScanRecords([]byte{keyPrefix, kindByTime}, nil, func(k, _ []byte) bool {
		key, ok := parseKey(k[2:])
		if !ok || (skip != nil && skip(key)) || !s.mine(claims[key], leader) {
			return true
		}
		next, found = key, true
		return false
	})
	return next, found, err
}

// own returns up to max keys of claims this broker holds that skip does
// not reject, earliest first.
func (s *Replicated) own(claims map[Key]string, skip func(Key) bool, max int) []Key {
	var out []Key
	for k, owner := range claims {
		if owner == s.cl.Node && (skip == nil || !skip(k)) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b Key) int {
		if a.Less(b) {
			return -1
		}
		return 1
	})
	return out[:min(len(out), max)]
}

// get reads the held messages under keys, leaving out those gone.
func (s *Replicated) get(keys []Key) ([]Message, error) {
	out := make([]Message, 0, len(keys))
	for _, k := range keys {
		tk := timeKey(k)
		var m Message
		var found bool
		var decErr error
		err := s.rs.ScanRecords(tk, nil, func(key, v []byte) bool {
			if bytes.Equal(key, tk) {
				m, decErr = Decode(v)
				found = true
			}
			return false
		})
		if err == nil {
			err = decErr
		}
		if err != nil {
			return nil, err
		}
		if found {
			out = append(out, m)
		}
	}
	return out, nil
}

// Delete removes routed (or dropped) messages and their claims, in one
// update when all are still held, else one by one, so the counts fall
// only by what was there.
func (s *Replicated) Delete(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ok, err := s.rs.UpdateRecords(ctx, deleteUpdate(msgs))
	if err != nil || ok || len(msgs) == 1 {
		if err != nil {
			err = fmt.Errorf("delayed: delete: %w", err)
		}
		return err
	}
	for i := range msgs {
		if _, err := s.rs.UpdateRecords(ctx, deleteUpdate(msgs[i:i+1])); err != nil {
			return fmt.Errorf("delayed: delete: %w", err)
		}
	}
	return nil
}

// deleteUpdate deletes msgs if every one is held.
func deleteUpdate(msgs []Message) meta.RecordUpdate {
	var u meta.RecordUpdate
	subs := map[string]int64{}
	for i := range msgs {
		m := &msgs[i]
		tk := timeKey(m.Key)
		u.Present = append(u.Present, tk)
		u.Delete = append(u.Delete, tk, claimKey(m.Key), exchangeKey2(m.VHost, m.Exchange, m.Key))
		subs[string(countKey(m.VHost, m.Exchange))]--
	}
	for k, n := range subs {
		u.Add = append(u.Add, meta.Counter{Key: []byte(k), Delta: n})
	}
	u.Add = append(u.Add, meta.Counter{Key: totalKey, Delta: -int64(len(msgs))})
	return u
}

// DeleteExchange deletes an exchange's messages in batches.
func (s *Replicated) DeleteExchange(ctx context.Context, vhost, exchange string) (int, error) {
	total := 0
	for {
		keys, err := s.exchangeKeys(vhost, exchange, batchSize)
		if err != nil || len(keys) == 0 {
			return total, err
		}
		msgs := make([]Message, len(keys))
		for i, k := range keys {
			msgs[i] = Message{Key: k, VHost: vhost, Exchange: exchange}
		}
		if err := s.Delete(ctx, msgs); err != nil {
			return total, err
		}
		total += len(msgs)
		if len(keys) < batchSize {
			return total, nil
		}
	}
}

func (s *Replicated) exchangeKeys(vhost, exchange string, max int) ([]Key, error) {
	p := exchangePrefix(vhost, exchange)
	var out []Key
	var bad []byte
	err := s.rs.ScanRecords(p, nil, func(k, _ []byte) bool {
		key, ok := parseKey(k[len(p):])
		if !ok {
			bad = bytes.Clone(k)
			return false
		}
		out = append(out, key)
		return len(out) < max
	})
	if err == nil && bad != nil {
		err = fmt.Errorf("%w: key %q", ErrCorrupt, bad)
	}
	return out, err
}

// Peek returns up to max of an exchange's held messages, earliest first.
func (s *Replicated) Peek(_ context.Context, vhost, exchange string, max int) ([]Message, error) {
	keys, err := s.exchangeKeys(vhost, exchange, max)
	if err != nil {
		return nil, err
	}
	return s.get(keys)
}

func (s *Replicated) counter(k []byte) int64 {
	var n int64
	_ = s.rs.ScanRecords(k, nil, func(key, v []byte) bool {
		if bytes.Equal(key, k) && len(v) == 8 {
			n = int64(binary.BigEndian.Uint64(v))
		}
		return false
	})
	return n
}

// Count returns how many messages an exchange holds (its replicated
// counter, read locally).
func (s *Replicated) Count(vhost, exchange string) int64 {
	return s.counter(countKey(vhost, exchange))
}

// Len returns how many messages the store holds.
func (s *Replicated) Len() int64 { return s.counter(totalKey) }

// LastSeq is the highest sequence number this broker gave; sequence
// numbers carry a tag of the broker's name in their high bits, so
// brokers sharing the store give different ones.
func (s *Replicated) LastSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeq
}

// follow makes the scheduler look at its stores again when a message due
// before its timer is held through feed by any broker, or the replica
// was replaced (a snapshot). Start calls it for a service whose durable
// store is Replicated; cancel stops it.
func (s *Service) follow(feed meta.ChangeFeed) (cancel func()) {
	return feed.Watch(func(c meta.Change) {
		switch c.Kind {
		case meta.ChangeRecord:
			if len(c.Shard) != 18 || c.Shard[0] != keyPrefix || c.Shard[1] != kindByTime {
				return
			}
			if k, ok := parseTimeKey([]byte(c.Shard)); ok {
				s.sched.held(k.Due)
			}
		case meta.ChangeReset:
			s.sched.Notify()
		}
	})
}
