package multiraft

import (
	"bufio"
	"context"
	"net"
	"sync/atomic"
	"time"
)

// outBatch is one ready cycle's messages and beats for one peer.
type outBatch struct {
	msgs  []groupMsg
	beats []beat
}

// peer is the connection to one other member: one per pair, dialled by
// the member with the lower id and used both ways. Its goroutine owns the
// connection's writing side; a reader goroutine per connection decodes
// frames into the engine's inbox.
type peer struct {
	e         *Engine
	id        uint64
	addr      string
	out       chan outBatch
	conns     chan net.Conn // accepted connections (the higher id's side)
	lastHeard atomic.Int64
}

func newPeer(e *Engine, id uint64, addr string) *peer {
	p := &peer{e: e, id: id, addr: addr, out: make(chan outBatch, 64), conns: make(chan net.Conn, 1)}
	p.lastHeard.Store(time.Now().UnixNano())
	return p
}

// enqueue hands b to the peer's goroutine without blocking the loop.
func (p *peer) enqueue(b outBatch) bool {
	select {
	case p.out <- b:
		return true
	default:
		return false
	}
}

func (p *peer) dials() bool { return p.e.cfg.ID < p.id }

// run obtains a connection (dialling or accepted), serves it until it
// fails, and again, until the engine stops.
func (p *peer) run() {
	defer p.e.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		var conn net.Conn
		if p.dials() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := p.e.cfg.Dial(ctx, p.addr)
			cancel()
			if err == nil {
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				w, herr := p.e.hs.dial(c, kindGroups, p.id)
				_ = c.SetDeadline(time.Time{})
				if herr == nil {
					p.serve(c, w, bufio.NewReader(c))
					backoff = 50 * time.Millisecond
					continue
				}
				_ = c.Close()
			}
			if !p.idle(backoff) {
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		select {
		case conn = <-p.conns:
		case <-p.e.stop:
			return
		case b := <-p.out:
			p.dropped(b)
			continue
		}
		_ = conn
	}
}

// idle waits d, dropping what the loop sends meanwhile; false when the
// engine stops.
func (p *peer) idle(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-p.e.stop:
			return false
		case b := <-p.out:
			p.dropped(b)
		}
	}
}

func (p *peer) dropped(b outBatch) {}

func (p *peer) serve(c net.Conn, w any, r *bufio.Reader) { _ = c.Close() }

func (e *Engine) accept() { e.wg.Done() }
