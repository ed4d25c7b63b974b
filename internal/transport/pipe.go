package transport

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// pipeBuffer bounds the bytes one direction of a pipe holds unread, as a
// socket's buffers do: a writer that gets that far ahead waits.
const pipeBuffer = 256 << 10

// bufPipe is an in-memory, full-duplex connection whose writes copy into
// a buffer and return without waiting for the reader (net.Pipe hands
// every write to the reader, a goroutine switch each way per write).
// Reads return the bytes of one write at most, so each read can be dated
// with the time its write began (PipeClock).
func bufPipe() (a, b *pipeConn) {
	ab, ba := newHalf(), newHalf()
	a = &pipeConn{r: ba, w: ab}
	b = &pipeConn{r: ab, w: ba}
	return a, b
}

// half is one direction of a bufPipe.
type half struct {
	mu      sync.Mutex
	buf     []byte // buf[off:] is unread; the array is kept across reads
	off     int
	segs    []seg // segs[soff:]: one per write still (partly) unread, in order
	soff    int
	rclosed bool          // the reading end closed
	wclosed bool          // the writing end closed
	change  chan struct{} // closed and replaced on a change someone waits for
	waited  bool          // someone waits on change
}

// seg is the unread part of one write: its length and when it began.
type seg struct {
	n  int
	at int64
}

func newHalf() *half { return &half{change: make(chan struct{})} }

// signalLocked wakes every waiter, if any (waitChanLocked).
func (h *half) signalLocked() {
	if h.waited {
		close(h.change)
		h.change = make(chan struct{})
		h.waited = false
	}
}

// waitChanLocked returns the channel signalLocked will close, and marks
// that someone waits on it: only then does a change cost a new channel.
func (h *half) waitChanLocked() <-chan struct{} {
	h.waited = true
	return h.change
}

// pipeConn is one end of a bufPipe.
type pipeConn struct {
	r, w *half

	dmu       sync.Mutex
	rdl, wdl  time.Time
	dlChanged chan struct{}
	closeOnce sync.Once
}

// deadline returns the read or write deadline and a channel closed when
// the deadlines change.
func (c *pipeConn) deadline(read bool) (time.Time, <-chan struct{}) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.dlChanged == nil {
		c.dlChanged = make(chan struct{})
	}
	if read {
		return c.rdl, c.dlChanged
	}
	return c.wdl, c.dlChanged
}

func (c *pipeConn) setDeadline(read, write bool, t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if read {
		c.rdl = t
	}
	if write {
		c.wdl = t
	}
	if c.dlChanged != nil {
		close(c.dlChanged)
	}
	c.dlChanged = make(chan struct{})
	return nil
}

func (c *pipeConn) SetDeadline(t time.Time) error      { return c.setDeadline(true, true, t) }
func (c *pipeConn) SetReadDeadline(t time.Time) error  { return c.setDeadline(true, false, t) }
func (c *pipeConn) SetWriteDeadline(t time.Time) error { return c.setDeadline(false, true, t) }

// wait blocks until ch closes, the deadline passes or changes; it
// returns os.ErrDeadlineExceeded once the deadline has passed.
func (c *pipeConn) wait(read bool, ch <-chan struct{}) error {
	dl, changed := c.deadline(read)
	var expired <-chan time.Time
	if !dl.IsZero() {
		d := time.Until(dl)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-ch:
	case <-changed:
	case <-expired:
		return os.ErrDeadlineExceeded
	}
	return nil
}

// readAt reads the bytes of one write at most and returns when that write
// began (0 when not dated).
func (c *pipeConn) readAt(p []byte) (int, int64, error) {
	h := c.r
	for {
		h.mu.Lock()
		if h.rclosed {
			h.mu.Unlock()
			return 0, 0, io.ErrClosedPipe
		}
		if h.off < len(h.buf) {
			s := &h.segs[h.soff]
			n := copy(p, h.buf[h.off:h.off+s.n])
			at := s.at
			h.off += n
			if s.n -= n; s.n == 0 {
				h.soff++
			}
			if h.off == len(h.buf) {
				// Empty: start again at the front of the same arrays.
				h.buf, h.off = h.buf[:0], 0
				h.segs, h.soff = h.segs[:0], 0
			}
			h.signalLocked()
			h.mu.Unlock()
			return n, at, nil
		}
		if h.wclosed {
			h.mu.Unlock()
			return 0, 0, io.EOF
		}
		ch := h.waitChanLocked()
		h.mu.Unlock()
		if len(p) == 0 {
			return 0, 0, nil
		}
		if err := c.wait(true, ch); err != nil {
			return 0, 0, err
		}
	}
}

func (c *pipeConn) Read(p []byte) (int, error) {
	n, _, err := c.readAt(p)
	return n, err
}

// writeAt copies p into the buffer, waiting while it is full, dating it at.
func (c *pipeConn) writeAt(p []byte, at int64) (int, error) {
	h := c.w
	done := 0
	for done < len(p) {
		h.mu.Lock()
		if h.wclosed || h.rclosed {
			h.mu.Unlock()
			return done, io.ErrClosedPipe
		}
		if room := pipeBuffer - (len(h.buf) - h.off); room > 0 {
			n := min(room, len(p)-done)
			if h.off > 0 && len(h.buf)+n > cap(h.buf) {
				// Move the unread bytes to the front rather than grow.
				h.buf = h.buf[:copy(h.buf, h.buf[h.off:])]
				h.off = 0
				h.segs = h.segs[:copy(h.segs, h.segs[h.soff:])]
				h.soff = 0
			}
			h.buf = append(h.buf, p[done:done+n]...)
			if k := len(h.segs); k > h.soff && h.segs[k-1].at == at && done > 0 {
				h.segs[k-1].n += n
			} else {
				h.segs = append(h.segs, seg{n: n, at: at})
			}
			done += n
			h.signalLocked()
			h.mu.Unlock()
			continue
		}
		ch := h.waitChanLocked()
		h.mu.Unlock()
		if err := c.wait(false, ch); err != nil {
			return done, err
		}
	}
	return done, nil
}

func (c *pipeConn) Write(p []byte) (int, error) { return c.writeAt(p, 0) }

// Close closes both directions: the peer reads what is buffered, then
// EOF; its writes fail.
func (c *pipeConn) Close() error {
	c.closeOnce.Do(func() {
		for _, h := range []*half{c.r, c.w} {
			h.mu.Lock()
			if h == c.r {
				h.rclosed = true
			} else {
				h.wclosed = true
			}
			h.signalLocked()
			h.mu.Unlock()
		}
	})
	return nil
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

func (c *pipeConn) LocalAddr() net.Addr  { return pipeAddr{} }
func (c *pipeConn) RemoteAddr() net.Addr { return pipeAddr{} }
