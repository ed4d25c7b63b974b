package mgmt

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// addrConn is a net.Conn that only has a remote address.
type addrConn struct {
	net.Conn
	addr net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.addr }

// BenchmarkAdmitAtCap is what the listener's accept spends on a new
// connection when every slot is held by an idle one: the scan for the
// connection to reclaim, under the listener's lock. The held connections
// come from 16 sources, none logged in.
func BenchmarkAdmitAtCap(b *testing.B) {
	for _, n := range []int{256, 4096} {
		b.Run(fmt.Sprint("conns=", n), func(b *testing.B) {
			l := HTTPLimits{MaxConnections: n, MaxUnauthenticatedPerSource: n}.Listener(nil).(*limitListener)
			conn := func(i int) *limitConn {
				c := &limitConn{Conn: addrConn{addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, byte(i%16)), Port: 1000 + i}}, l: l}
				c.source = sourceOf(c.RemoteAddr())
				c.setState(http.StateIdle)
				return c
			}
			for i := range n {
				l.mu.Lock()
				_, ok := l.admitLocked(conn(i), time.Now())
				l.mu.Unlock()
				if !ok {
					b.Fatal("refused below the cap")
				}
			}
			b.ReportAllocs()
			i := n
			for b.Loop() {
				c := conn(i)
				i++
				l.mu.Lock()
				victim, ok := l.admitLocked(c, time.Now())
				l.mu.Unlock()
				if !ok || victim == nil {
					b.Fatal("no idle connection reclaimed at the cap")
				}
			}
		})
	}
}
