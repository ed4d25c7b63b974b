package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFakeFiresInOrder(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewFake(start)
	var got []string
	var seen []time.Time
	add := func(name string, d time.Duration) Timer {
		return c.AfterFunc(d, func() { got = append(got, name); seen = append(seen, c.Now()) })
	}
	add("c", 3*time.Second)
	add("a", time.Second)
	stopped := add("x", 2*time.Second)
	add("b", time.Second) // same deadline as a: creation order
	require.True(t, stopped.Stop())
	require.False(t, stopped.Stop())

	c.Advance(500 * time.Millisecond)
	require.Empty(t, got)
	c.Advance(time.Second)
	require.Equal(t, []string{"a", "b"}, got)
	require.Equal(t, start.Add(time.Second), seen[0])
	require.Equal(t, start.Add(1500*time.Millisecond), c.Now())
	c.Advance(10 * time.Second)
	require.Equal(t, []string{"a", "b", "c"}, got)
	require.Equal(t, start.Add(3*time.Second), seen[2])
	require.Equal(t, 0, c.Pending())
}

func TestFakeTimerFromTimer(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	n := 0
	var tick func()
	tick = func() {
		n++
		if n < 3 {
			c.AfterFunc(time.Second, tick)
		}
	}
	c.AfterFunc(time.Second, tick)
	c.Advance(10 * time.Second)
	require.Equal(t, 3, n)
	c.AfterFunc(0, func() { n++ })
	require.Equal(t, 3, n) // due timers wait for Advance
	c.Advance(0)
	require.Equal(t, 4, n)
}

func TestReal(t *testing.T) {
	done := make(chan struct{})
	Real.AfterFunc(0, func() { close(done) })
	<-done
	require.False(t, Real.Now().IsZero())
}
