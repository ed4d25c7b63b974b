package placement

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"sync"
	"time"

	"github.com/warrenmq/broker/meta"
)

// Restarting a link from any member: a request counter in the store,
// which the holder reads at each renewal.
//
// Restart increments name's request record (p, 1, name: an 8-byte
// big-endian count), conditional on the lease record existing (someone
// holds the link). The holder reads the count before each renewal; when
// it is above the count it last served, it stops the link, waits for it
// to return, starts it again under the same lease, and stores the count
// it served in its status record with that renewal (reportValue.Served).
// Restart returns once the status record shows its count served. A holder
// that acquires the link serves every count already stored (a link that
// starts afresh has been restarted), and the release deletes the request
// record with the lease: a waiting Restart that sees its record gone or
// below its count knows the link ended or changed hands since, and so was
// started afresh.
//
// Why the store and not a call to the holder: the store is what every
// member already shares and the holder already reads and writes at each
// renewal, so the request costs no new connection between members, no
// address book, no goroutine and no extra write on the holder's side;
// and it stays correct when the holder changes in the middle of a request
// (the next holder serves it). The price is latency: a request made on
// another member waits for the holder's next renewal (at most TTL/6); a
// request made on the holder's own member wakes it at once.

// restartPrefix starts the request records, beside the status records
// (reportPrefix): a link's name never starts with 0 or 1.
var restartPrefix = []byte{keyPrefix, 1}

func restartKey(name string) []byte { return append(append([]byte(nil), restartPrefix...), name...) }

// waitStep is how often a waiting Restart reads its replica for the
// holder's answer: a local read, no store round.
const waitStep = 10 * time.Millisecond

// wakers are the holders running here, woken by a Restart made on this
// member so that they need not wait for their next renewal.
type wakers struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (w *wakers) add(name string) chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string]chan struct{}{}
	}
	w.m[name] = ch
	w.mu.Unlock()
	return ch
}

func (w *wakers) remove(name string, ch chan struct{}) {
	w.mu.Lock()
	if w.m[name] == ch {
		delete(w.m, name)
	}
	w.mu.Unlock()
}

func (w *wakers) wake(name string) {
	w.mu.Lock()
	ch := w.m[name]
	w.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Restart asks the member holding name to stop its link and start it
// again, and waits until it has (or the link ended or changed hands,
// which starts it afresh too). It reports false when no member holds
// name; an error when ctx ends first or the store fails.
func (l *Lease) Restart(ctx context.Context, name string) (bool, error) {
	k, rk := key(name), restartKey(name)
	var want uint64
	for {
		cur := l.read(rk)
		want = count(cur) + 1
		ok, err := l.rs.UpdateRecords(ctx, meta.RecordUpdate{
			Present: [][]byte{k},
			Match:   []meta.Record{{Key: rk, Value: cur}},
			Set:     []meta.Record{{Key: rk, Value: binary.BigEndian.AppendUint64(nil, want)}},
		})
		if err != nil {
			return false, err
		}
		if ok {
			break
		}
		if l.read(k) == nil {
			return false, nil // nobody holds it
		}
		// Another request came first: count again.
	}
	l.wakers.wake(name)
	t := time.NewTicker(waitStep)
	defer t.Stop()
	for {
		if req := l.read(rk); req == nil || count(req) < want || l.served(name) >= want {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-t.C:
		}
	}
}

// requested is name's request count in this replica.
func (l *Lease) requested(name string) uint64 { return count(l.read(restartKey(name))) }

// served is the request count name's holder last said it served.
func (l *Lease) served(name string) uint64 {
	v := l.read(reportKey(name))
	if v == nil {
		return 0
	}
	var rv reportValue
	if json.Unmarshal(v, &rv) != nil {
		return 0
	}
	return rv.Served
}

func count(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}
