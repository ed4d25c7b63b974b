package delayed

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Key layout in the broker's Pebble database (first byte 'd', which no
// other store of the broker uses):
//
//	by time:     'd' 't' due(8) seq(8)                       -> encoded Message
//	by exchange: 'd' 'x' uvarint(len) vhost uvarint(len) exchange due(8) seq(8) -> empty
//
// due is stored with its sign bit flipped, big-endian, so byte order is
// numeric order for negative times too. The by-exchange keys serve Peek,
// DeleteExchange and, at open, the counts.
const (
	keyPrefix  = 'd'
	kindByTime = 't'
	kindByX    = 'x'
)

func appendKey(dst []byte, k Key) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(k.Due)^(1<<63))
	return binary.BigEndian.AppendUint64(dst, k.Seq)
}

func parseKey(b []byte) (Key, bool) {
	if len(b) != 16 {
		return Key{}, false
	}
	return Key{Due: int64(binary.BigEndian.Uint64(b) ^ (1 << 63)), Seq: binary.BigEndian.Uint64(b[8:])}, true
}

func timeKey(k Key) []byte { return appendKey([]byte{keyPrefix, kindByTime}, k) }

func exchangePrefix(vhost, exchange string) []byte {
	p := []byte{keyPrefix, kindByX}
	p = binary.AppendUvarint(p, uint64(len(vhost)))
	p = append(p, vhost...)
	p = binary.AppendUvarint(p, uint64(len(exchange)))
	return append(p, exchange...)
}

func exchangeKey2(vhost, exchange string, k Key) []byte {
	return appendKey(exchangePrefix(vhost, exchange), k)
}

// upper returns the smallest key greater than every key starting with p.
func upper(p []byte) []byte {
	u := bytes.Clone(p)
	for i := len(u) - 1; i >= 0; i-- {
		if u[i] < 0xff {
			u[i]++
			return u[:i+1]
		}
	}
	return nil
}

// Pebble is a Store in a Pebble database the caller owns (the broker's).
// Only the per-exchange counts and one low-water key are in memory, so a
// million held messages cost disk, not heap.
type Pebble struct {
	db *pebble.DB
	c  counts

	// low is a key no held message sorts before: Due starts its scan
	// there rather than at the start of the keyspace, where routed
	// messages leave tombstones that every scan would step over until
	// a compaction drops them. Put lowers it after its commit; a scan
	// raises it to the first key it found unless a Put lowered it
	// meanwhile (lowGen counts the lowerings).
	lowMu  sync.Mutex
	low    Key
	lowGen uint64
}

var _ Store = (*Pebble)(nil)

// OpenPebble opens the store on db, counting what it holds.
func OpenPebble(db *pebble.DB) (*Pebble, error) {
	s := &Pebble{db: db, low: Key{Due: -1 << 63}}
	p := []byte{keyPrefix, kindByX}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: upper(p)})
	if err != nil {
		return nil, fmt.Errorf("delayed: open: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		vh, ex, k, ok := parseExchangeKey(it.Key())
		if !ok {
			return nil, fmt.Errorf("%w: key %q", ErrCorrupt, it.Key())
		}
		s.c.add(vh, ex, 1)
		s.c.sawSeq(k.Seq)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("delayed: open: %w", err)
	}
	return s, nil
}

func parseExchangeKey(b []byte) (vhost, exchange string, k Key, ok bool) {
	b = b[2:]
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return "", "", Key{}, false
	}
	vhost, b = string(b[w:w+int(n)]), b[w+int(n):]
	n, w = binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return "", "", Key{}, false
	}
	exchange, b = string(b[w:w+int(n)]), b[w+int(n):]
	k, ok = parseKey(b)
	return vhost, exchange, k, ok
}

func (s *Pebble) Put(_ context.Context, msgs []Message, sync bool) error {
	if len(msgs) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	var buf []byte
	for i := range msgs {
		m := &msgs[i]
		buf = m.Encode(buf[:0])
		if err := b.Set(timeKey(m.Key), buf, nil); err != nil {
			return err
		}
		if err := b.Set(exchangeKey2(m.VHost, m.Exchange, m.Key), nil, nil); err != nil {
			return err
		}
	}
	opt := pebble.NoSync
	if sync {
		opt = pebble.Sync
	}
	if err := b.Commit(opt); err != nil {
		return fmt.Errorf("delayed: put: %w", err)
	}
	// Lowered after the commit, so that a scan that read the old low
	// either sees these keys in its snapshot or sees lowGen move.
	s.lowMu.Lock()
	for i := range msgs {
		if msgs[i].Key.Less(s.low) {
			s.low = msgs[i].Key
		}
	}
	s.lowGen++
	s.lowMu.Unlock()
	for i := range msgs {
		s.c.add(msgs[i].VHost, msgs[i].Exchange, 1)
		s.c.sawSeq(msgs[i].Seq)
	}
	return nil
}

func (s *Pebble) Due(_ context.Context, until int64, max int) ([]Message, error) {
	var out []Message
	err := s.scan(func(k Key, v []byte) (bool, error) {
		if k.Due > until || len(out) >= max {
			return false, nil
		}
		m, err := Decode(v)
		if err != nil {
			return false, err
		}
		out = append(out, m)
		return true, nil
	})
	return out, err
}

// scan walks the by-time keys from the low-water key in order until f
// says stop.
func (s *Pebble) scan(f func(Key, []byte) (bool, error)) error {
	p := []byte{keyPrefix, kindByTime}
	s.lowMu.Lock()
	start, gen := timeKey(s.low), s.lowGen
	s.lowMu.Unlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: upper(p)})
	if err != nil {
		return fmt.Errorf("delayed: scan: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k, ok := parseKey(it.Key()[2:])
		if !ok {
			return fmt.Errorf("%w: key %q", ErrCorrupt, it.Key())
		}
		if start != nil {
			s.lowMu.Lock()
			if s.lowGen == gen && s.low.Less(k) {
				s.low = k
			}
			s.lowMu.Unlock()
			start = nil
		}
		more, err := f(k, it.Value())
		if err != nil || !more {
			return err
		}
	}
	return it.Error()
}

func (s *Pebble) Next(_ context.Context, skip func(Key) bool) (Key, bool, error) {
	var next Key
	found := false
	err := s.scan(func(k Key, _ []byte) (bool, error) {
		if skip != nil && skip(k) {
			return true, nil
		}
		next, found = k, true
		return false, nil
	})
	return next, found, err
}

func (s *Pebble) Delete(_ context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	var gone []Message
	for i := range msgs {
		m := &msgs[i]
		// Count only what was there: a Delete of a message routed twice
		// (after a crash) or deleted with its exchange is a no-op.
		if _, closer, err := s.db.Get(timeKey(m.Key)); err == nil {
			closer.Close()
			gone = append(gone, *m)
		} else if err != pebble.ErrNotFound {
			return fmt.Errorf("delayed: delete: %w", err)
		}
		if err := b.Delete(timeKey(m.Key), nil); err != nil {
			return err
		}
		if err := b.Delete(exchangeKey2(m.VHost, m.Exchange, m.Key), nil); err != nil {
			return err
		}
	}
	// Not synced: a lost delete routes the message again after a crash
	// (a duplicate, never a loss), and the queues' own synced writes
	// carry it to disk soon anyway.
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("delayed: delete: %w", err)
	}
	for _, m := range gone {
		s.c.add(m.VHost, m.Exchange, -1)
	}
	return nil
}

func (s *Pebble) DeleteExchange(ctx context.Context, vhost, exchange string) (int, error) {
	keys, err := s.exchangeKeys(vhost, exchange, -1)
	if err != nil {
		return 0, err
	}
	msgs := make([]Message, len(keys))
	for i, k := range keys {
		msgs[i] = Message{Key: k, VHost: vhost, Exchange: exchange}
	}
	return len(msgs), s.Delete(ctx, msgs)
}

// exchangeKeys lists up to max (all when negative) keys of an exchange's
// messages, earliest first.
func (s *Pebble) exchangeKeys(vhost, exchange string, max int) ([]Key, error) {
	p := exchangePrefix(vhost, exchange)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: upper(p)})
	if err != nil {
		return nil, fmt.Errorf("delayed: list: %w", err)
	}
	defer it.Close()
	var out []Key
	for ok := it.First(); ok && (max < 0 || len(out) < max); ok = it.Next() {
		k, ok := parseKey(it.Key()[len(p):])
		if !ok {
			return nil, fmt.Errorf("%w: key %q", ErrCorrupt, it.Key())
		}
		out = append(out, k)
	}
	return out, it.Error()
}

func (s *Pebble) Peek(_ context.Context, vhost, exchange string, max int) ([]Message, error) {
	keys, err := s.exchangeKeys(vhost, exchange, max)
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(keys))
	for _, k := range keys {
		v, closer, err := s.db.Get(timeKey(k))
		if err == pebble.ErrNotFound {
			continue // routed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("delayed: peek: %w", err)
		}
		m, err := Decode(v)
		closer.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (s *Pebble) Count(vhost, exchange string) int64 { return s.c.count(vhost, exchange) }
func (s *Pebble) Len() int64                         { return s.c.len() }
func (s *Pebble) LastSeq() uint64                    { return s.c.lastSeq() }
