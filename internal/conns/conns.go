package conns

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/shrink"
)

// Set is the broker's open connections and listeners. Make it with New.
type Set struct {
	cfg    *session.Config
	log    *slog.Logger
	quit   <-chan struct{} // closed when the broker closes: wakes backoff sleeps
	closed error           // what a closed set answers
	nextID atomic.Uint64

	mu struct {
		sync.Mutex
		closed    bool
		listeners map[net.Listener]struct{}
		conns     map[*session.Conn]struct{}
		// connsPeak rebuilds conns once closes left it a quarter of its
		// largest size (forgetLocked).
		connsPeak shrink.Peak
		addr      net.Addr // first listener's address
	}
	// wg counts every goroutine the set started. Add happens under mu
	// with closed false, so no Add can race with the Wait in Wait.
	wg sync.WaitGroup
}

// New returns an empty set whose connections are served with cfg; quit
// wakes its accept loops' backoff sleeps, and closed is the error it
// answers once closed.
func New(cfg *session.Config, log *slog.Logger, quit <-chan struct{}, closed error) *Set {
	s := &Set{cfg: cfg, log: log, quit: quit, closed: closed}
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*session.Conn]struct{})
	return s
}

// NextID numbers the broker's connections, served or direct.
func (s *Set) NextID() uint64 { return s.nextID.Add(1) }

// Serve accepts connections on l until l fails or the set closes, taking
// ownership of l. It returns the closed error once closed; otherwise the
// accept error.
func (s *Set) Serve(l net.Listener) error {
	if !s.addListener(l) {
		l.Close()
		return s.closed
	}
	return s.serve(l)
}

// serve is the accept loop for a registered listener.
func (s *Set) serve(l net.Listener) error {
	defer s.removeListener(l)
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return s.closed
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				// Transient (EMFILE, ECONNABORTED, ...): back off like
				// net/http instead of spinning or giving up.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("broker: accept failed, retrying", "err", err, "backoff", backoff)
				if !s.sleep(backoff) {
					return s.closed
				}
				continue
			}
			l.Close()
			return fmt.Errorf("broker: accept: %w", err)
		}
		backoff = 0
		id := fmt.Sprintf("%s -> %s#%d", nc.RemoteAddr(), nc.LocalAddr(), s.NextID())
		s.ServeConn(nc, id, false)
	}
}

// sleep waits d or until quit; it reports false when the set closed.
func (s *Set) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return !s.isClosed()
	case <-s.quit:
		return false
	}
}

// ServeInBackground serves l on a goroutine the set owns until it closes;
// an accept error is logged with the text stopped.
func (s *Set) ServeInBackground(l net.Listener, stopped string) (net.Addr, error) {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		l.Close()
		return nil, s.closed
	}
	s.addListenerLocked(l)
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		err := s.serve(l)
		if err != nil && !errors.Is(err, s.closed) {
			s.log.Error(stopped, "addr", l.Addr().String(), "err", err)
		}
	}()
	return l.Addr(), nil
}

// ServeConn registers rwc and serves it on a new goroutine; internal marks
// the connection as the broker's own. It reports false (after closing rwc)
// when the set is closed.
func (s *Set) ServeConn(rwc io.ReadWriteCloser, id string, internal bool) bool {
	c := session.NewConn(rwc, id, s.cfg)
	if internal {
		c.MarkInternal()
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		rwc.Close()
		return false
	}
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()

	go func() {
		defer s.wg.Done()
		if err := c.Serve(); err != nil {
			s.log.Debug("broker: connection ended", "conn", id, "err", err)
		}
		s.Forget(c)
	}()
	return true
}

// Register adds a direct connection, counted like a served one until its
// Done; it reports false when the set is closed.
func (s *Set) Register(c *session.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

// Forget takes a finished connection out of the set.
func (s *Set) Forget(c *session.Conn) {
	s.mu.Lock()
	s.forgetLocked(c)
	s.mu.Unlock()
}

// Done ends the count a successful Register started.
func (s *Set) Done() { s.wg.Done() }

// forgetLocked deletes c (mu held), and rebuilds the map once closes left
// it a quarter of its largest size.
func (s *Set) forgetLocked(c *session.Conn) {
	delete(s.mu.conns, c)
	s.mu.conns = shrink.Map(s.mu.conns, &s.mu.connsPeak)
}

// Go runs f on a goroutine the set counts, unless the set is closed; it
// reports whether f was started.
func (s *Set) Go(f func()) bool {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return false
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

func (s *Set) addListener(l net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	s.addListenerLocked(l)
	return true
}

func (s *Set) addListenerLocked(l net.Listener) {
	s.mu.listeners[l] = struct{}{}
	if s.mu.addr == nil {
		s.mu.addr = l.Addr()
	}
}

func (s *Set) removeListener(l net.Listener) {
	s.mu.Lock()
	delete(s.mu.listeners, l)
	s.mu.Unlock()
}

func (s *Set) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}

// Addr is the address of the first listener the set served, or nil before
// any.
func (s *Set) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.addr
}

// TCPAddrs lists the addresses of the TCP listeners being served.
func (s *Set) TCPAddrs() []*net.TCPAddr {
	s.mu.Lock()
	defer s.mu.Unlock()
	var as []*net.TCPAddr
	for l := range s.mu.listeners {
		if a, ok := l.Addr().(*net.TCPAddr); ok {
			as = append(as, a)
		}
	}
	return as
}

// List returns the open connections, in no order.
func (s *Set) List() []*session.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked()
}

func (s *Set) listLocked() []*session.Conn {
	cs := make([]*session.Conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		cs = append(cs, c)
	}
	return cs
}

// Sorted returns the open connections, sorted by id.
func (s *Set) Sorted() []*session.Conn {
	cs := s.List()
	slices.SortFunc(cs, func(x, y *session.Conn) int { return strings.Compare(x.ID(), y.ID()) })
	return cs
}

// ByID maps the id of every open connection to it.
func (s *Set) ByID() map[string]*session.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := make(map[string]*session.Conn, len(s.mu.conns))
	for c := range s.mu.conns {
		live[c.ID()] = c
	}
	return live
}

// Refuse closes the set to new listeners, connections and goroutines, and
// closes the listeners (the accept loops then end with the closed error);
// open connections go on.
func (s *Set) Refuse() {
	ls, _ := s.Close()
	for _, l := range ls {
		l.Close()
	}
}

// Close closes the set to new listeners, connections and goroutines, and
// returns the listeners and connections it held then, for the caller to
// close.
func (s *Set) Close() ([]net.Listener, []*session.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.closed = true
	ls := make([]net.Listener, 0, len(s.mu.listeners))
	for l := range s.mu.listeners {
		ls = append(ls, l)
	}
	return ls, s.listLocked()
}

// Wait returns once every goroutine the set started has ended.
func (s *Set) Wait() { s.wg.Wait() }
