package login

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/clock"
)

// TestLoginThrottleDecisions drives the throttle on a fake clock: a source
// may fail throttleFree times at full speed; after that each of its logins
// waits, longer with each failure and one delay after the previous login,
// up to throttleMax; time forgives failures; other sources are never
// slowed, and in-process peers are not throttled.
func TestLoginThrottleDecisions(t *testing.T) {
	c := clock.NewFake(time.Unix(1_000_000, 0))
	th := NewThrottle(c)
	const a, b = "10.0.0.1", "10.0.0.2"

	for range throttleFree {
		require.Zero(t, th.Admit(a))
		th.Failed(a)
	}
	require.Zero(t, th.Admit(a), "throttleFree failures are free")
	th.Failed(a)
	require.Equal(t, throttleBase, th.Admit(a), "the first failure beyond them costs throttleBase")
	require.Equal(t, 2*throttleBase, th.Admit(a), "a second login at once is answered one delay after the first")
	th.Failed(a)
	require.Equal(t, 4*throttleBase, th.Admit(a), "the delay doubles, counted from the last reserved answer")
	for range 20 {
		th.Failed(a)
	}
	require.Equal(t, throttleMax, th.Admit(a), "capped")
	require.Equal(t, throttleMax, th.Admit(a), "capped however many logins wait")

	require.Zero(t, th.Admit(b), "another source is not slowed")
	require.Zero(t, th.Admit(""), "in-process peers are not throttled")
	th.Failed("")
	require.Empty(t, th.srcs[""])

	// Time forgives: after all failures were forgiven, a is free again.
	c.Advance(time.Duration(throttleFree+30) * throttleForgive)
	require.Zero(t, th.Admit(a))
}

// TestLoginThrottleSources: the throttle keys IPv4 addresses, IPv4-mapped
// IPv6 as IPv4, IPv6 by /64, and treats pipes and no address as in-process.
func TestLoginThrottleSources(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 5}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7")}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6")}, "2001:db8:1:2::/64"},
		{nil, ""},
		{pipeAddr{}, ""},
	} {
		require.Equal(t, tc.want, SourceKey(tc.addr), "%v", tc.addr)
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// TestLoginThrottleTableIsBounded: an attacker rotating addresses fills
// the table only up to throttleSources; past that its sources share one
// bucket, which is throttled like a single source.
func TestLoginThrottleTableIsBounded(t *testing.T) {
	c := clock.NewFake(time.Unix(1_000_000, 0))
	th := NewThrottle(c)
	for i := range throttleSources + throttleFree + 2 {
		th.Failed(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String())
	}
	require.LessOrEqual(t, len(th.srcs), throttleSources+1)
	require.Positive(t, th.Admit("192.0.2.1"), "an unknown source in a full table shares the throttled bucket")
	c.Advance(time.Duration(throttleFree+10) * throttleForgive)
	th.Failed("192.0.2.1")
	require.Less(t, len(th.srcs), 10, "forgiven sources are pruned when the table is full")
}
