package placement

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/broker/meta"
)

// DefaultTTL is the lease's time to live when NewLease is given 0: how
// long a dead holder's links wait before another member runs them.
const DefaultTTL = 6 * time.Second

// keyPrefix is the first byte of the lease records in meta.Records.
const keyPrefix = 'p'

// Lease places links over a shared store; see the package doc.
type Lease struct {
	rs     meta.Records
	member string
	holder string // member + "/" + nonce: this incarnation
	ttl    time.Duration
	wakers wakers // the links held here, for a Restart made here
}

// NewLease returns a Lease of member over rs; ttl 0 means DefaultTTL.
func NewLease(rs meta.Records, member string, ttl time.Duration) *Lease {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	return &Lease{rs: rs, member: member, holder: member + "/" + hex.EncodeToString(nonce[:]), ttl: ttl}
}

func (l *Lease) stopAfter() time.Duration  { return l.ttl / 3 }
func (l *Lease) renewEvery() time.Duration { return l.ttl / 6 }

// Holder reports which member holds name in this member's replica ("" for
// none): what a status page shows as the link's node.
func (l *Lease) Holder(name string) string {
	v := l.read(key(name))
	if v == nil {
		return ""
	}
	h, _, _ := decode(v)
	member, _, _ := strings.Cut(h, "/")
	return member
}

// Run calls fn each time this member acquires name, with a context that
// ends when it loses the lease (fn must then return soon: see the
// package doc), until ctx ends (Run returns ctx.Err()) or fn returns while
// this member still holds name (Run returns fn's error: the link is
// finished). Either way it releases name before it returns.
func (l *Lease) Run(ctx context.Context, name string, fn func(context.Context) error) error {
	return l.RunReporting(ctx, name, nil, fn)
}

// RunReporting is Run that, while this member holds name, also stores
// report's value as name's status record with every acquisition and
// renewal (in the same conditional update, so only the holder writes
// it), for Reported to read on any member; report nil stores none.
func (l *Lease) RunReporting(ctx context.Context, name string, report func() []byte, fn func(context.Context) error) error {
	k := key(name)
	var seen []byte // the value last read, and since when it has not changed
	var seenAt time.Time
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
		}
		poll.Reset(l.renewEvery())
		cur := l.read(k)
		if seenAt.IsZero() || !bytes.Equal(cur, seen) {
			seen, seenAt = cur, time.Now()
		}
		h, gen, _ := decode(cur)
		// Free, ours from before, or unchanged for a whole TTL: take it.
		if cur != nil && h != l.holder && time.Since(seenAt) < l.ttl {
			continue
		}
		start := time.Now()
		mine := encode(l.holder, gen+1)
		served := l.requested(name) // a link that starts afresh serves them all
		ok, err := l.rs.UpdateRecords(ctx, meta.RecordUpdate{
			Match: []meta.Record{{Key: k, Value: cur}}, Set: l.withReport(name, report, served, meta.Record{Key: k, Value: mine}),
		})
		if err != nil || !ok {
			continue // someone else renewed or took it, or the store is away
		}
		done, err := l.hold(ctx, name, report, k, mine, start, served, fn)
		if done {
			l.release(name, k)
			return err
		}
		seenAt = time.Time{}
	}
}

// hold runs fn while this member keeps the lease it acquired at start
// with value mine, having served the restart requests up to served. It
// reports done when Run must return (fn finished or ctx ended) with the
// error to return; not done when the lease was lost and fn has returned.
func (l *Lease) hold(ctx context.Context, name string, report func() []byte, k, mine []byte, start time.Time, served uint64, fn func(context.Context) error) (bool, error) {
	validUntil := start.Add(l.stopAfter())
	wake := l.wakers.add(name)
	defer l.wakers.remove(name, wake)
	var cancel context.CancelFunc
	var result chan error
	run := func() {
		var fctx context.Context
		fctx, cancel = context.WithCancel(ctx)
		result = make(chan error, 1)
		go func(result chan<- error) { result <- fn(fctx) }(result)
	}
	stop := func() error { cancel(); return <-result }
	run()
	defer func() { cancel() }()
	for {
		wait := min(l.renewEvery(), time.Until(validUntil))
		t := time.NewTimer(wait)
		select {
		case err := <-result:
			t.Stop()
			if ctx.Err() != nil {
				return true, ctx.Err()
			}
			return true, err
		case <-ctx.Done():
			t.Stop()
			_ = stop()
			return true, ctx.Err()
		case <-wake: // a Restart made here: look at once
			t.Stop()
		case <-t.C:
		}
		if !time.Now().Before(validUntil) {
			_ = stop() // could not renew in time: another member may take it
			return false, nil
		}
		if req := l.requested(name); req > served {
			// Restarted: the link stops and starts again under the
			// same lease; the renewal below says so.
			select {
			case err := <-result: // it had finished: that wins
				return true, err
			default:
			}
			_ = stop()
			if ctx.Err() != nil {
				return true, ctx.Err()
			}
			run()
			served = req
		}
		h, gen, _ := decode(mine)
		next := encode(h, gen+1)
		t0 := time.Now()
		rctx, rcancel := context.WithDeadline(ctx, validUntil)
		ok, err := l.rs.UpdateRecords(rctx, meta.RecordUpdate{
			Match: []meta.Record{{Key: k, Value: mine}}, Set: l.withReport(name, report, served, meta.Record{Key: k, Value: next}),
		})
		rcancel()
		switch {
		case err == nil && ok:
			mine, validUntil = next, t0.Add(l.stopAfter())
		case err == nil && !ok:
			_ = stop() // taken: another member holds it now
			return false, nil
		case ctx.Err() != nil:
			_ = stop()
			return true, ctx.Err()
		}
		// An error leaves the outcome unknown: if the renewal applied,
		// mine is stale and the next one fails, which stops the link;
		// if not, the link stops at validUntil unless one succeeds.
	}
}

// release deletes the lease if this member still holds it, so another
// member need not wait a TTL; it gives up after StopAfter (the store is
// away: then the others wait).
func (l *Lease) release(name string, k []byte) {
	cur := l.read(k)
	h, _, _ := decode(cur)
	if cur == nil || h != l.holder {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.stopAfter())
	defer cancel()
	_, _ = l.rs.UpdateRecords(ctx, meta.RecordUpdate{Match: []meta.Record{{Key: k, Value: cur}}, Delete: [][]byte{k, reportKey(name), restartKey(name)}})
}

// read returns the lease record's value in this replica, nil for none.
func (l *Lease) read(k []byte) []byte {
	var v []byte
	_ = l.rs.ScanRecords(k, nil, func(key, val []byte) bool {
		if bytes.Equal(key, k) {
			v = bytes.Clone(val)
		}
		return false
	})
	return v
}

func key(name string) []byte { return append([]byte{keyPrefix}, name...) }

// encode and decode a lease value: "holder generation".
func encode(holder string, gen uint64) []byte {
	return []byte(holder + " " + strconv.FormatUint(gen, 10))
}

func decode(v []byte) (holder string, gen uint64, err error) {
	if v == nil {
		return "", 0, nil
	}
	// The generation has no space; a holder (a node name) may.
	i := bytes.LastIndexByte(v, ' ')
	if i < 0 {
		return "", 0, fmt.Errorf("placement: bad lease value %q", v)
	}
	gen, err = strconv.ParseUint(string(v[i+1:]), 10, 64)
	return string(v[:i]), gen, err
}
