package queue

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// serve takes n turns on s and returns the tags served; credit says who
// may take a message.
func serve(s *consumerSet, prioritized bool, n int, credit func(*Consumer) bool) []string {
	var got []string
	for range n {
		var c *Consumer
		if prioritized {
			c = s.byPriority(credit)
		} else {
			c = s.roundRobin(credit)
		}
		if c == nil {
			got = append(got, "-")
			continue
		}
		got = append(got, c.Tag)
	}
	return got
}

func everyone(*Consumer) bool { return true }

func TestConsumerSetOrder(t *testing.T) {
	mk := func(tag string, prio int32) *Consumer {
		return &Consumer{Tag: tag, Owner: owner, Priority: prio}
	}
	for _, tc := range []struct {
		name        string
		prioritized bool
		steps       func(s *consumerSet) []string
		want        []string
	}{
		{"round robin in arrival order", false, func(s *consumerSet) []string {
			s.add(mk("a", 0))
			s.add(mk("b", 0))
			s.add(mk("c", 0))
			return serve(s, false, 4, everyone)
		}, []string{"a", "b", "c", "a"}},
		{"a newcomer joins the end of the round", false, func(s *consumerSet) []string {
			s.add(mk("a", 0))
			s.add(mk("b", 0))
			s.add(mk("c", 0))
			got := serve(s, false, 1, everyone) // a; b is next
			s.add(mk("d", 0))
			return append(got, serve(s, false, 4, everyone)...)
		}, []string{"a", "b", "c", "d", "a"}},
		{"cancelling the next one passes the turn on", false, func(s *consumerSet) []string {
			s.add(mk("a", 0))
			s.add(mk("b", 0))
			s.add(mk("c", 0))
			got := serve(s, false, 1, everyone) // a; b is next
			s.remove(owner, "b")
			return append(got, serve(s, false, 3, everyone)...)
		}, []string{"a", "c", "a", "c"}},
		{"no credit is skipped", false, func(s *consumerSet) []string {
			s.add(mk("a", 0))
			s.add(mk("b", 0))
			return serve(s, false, 3, func(c *Consumer) bool { return c.Tag == "b" })
		}, []string{"b", "b", "b"}},
		{"nobody with credit", false, func(s *consumerSet) []string {
			s.add(mk("a", 0))
			return serve(s, false, 1, func(*Consumer) bool { return false })
		}, []string{"-"}},
		{"highest priority first, peers take turns", true, func(s *consumerSet) []string {
			s.add(mk("low", 1))
			s.add(mk("h1", 5))
			s.add(mk("h2", 5))
			return serve(s, true, 4, everyone)
		}, []string{"h1", "h2", "h1", "h2"}},
		{"lower priority when the higher have no credit", true, func(s *consumerSet) []string {
			s.add(mk("low", -3))
			s.add(mk("high", 7))
			return serve(s, true, 2, func(c *Consumer) bool { return c.Tag != "high" })
		}, []string{"low", "low"}},
		{"the one served moves behind its peers", true, func(s *consumerSet) []string {
			s.add(mk("p1", 2))
			s.add(mk("p2", 2))
			s.add(mk("p3", 2))
			got := serve(s, true, 1, func(c *Consumer) bool { return c.Tag == "p2" })
			return append(got, serve(s, true, 3, everyone)...)
		}, []string{"p2", "p1", "p3", "p2"}},
		{"cancelling a whole level", true, func(s *consumerSet) []string {
			s.add(mk("a", 1))
			s.add(mk("b", 9))
			s.remove(owner, "b")
			got := serve(s, true, 2, everyone)
			return append(got, s.first().Tag)
		}, []string{"a", "a", "a"}},
		{"single active: the first of the highest priority", false, func(s *consumerSet) []string {
			s.add(mk("a", 0))
			s.add(mk("b", 3))
			s.add(mk("c", 3))
			first := s.first().Tag
			s.remove(owner, "b")
			return []string{first, s.first().Tag}
		}, []string{"b", "c"}},
		{"same owner and tag twice: both go", false, func(s *consumerSet) []string {
			s.add(mk("a", 0))
			s.add(mk("a", 0))
			s.add(mk("b", 0))
			s.remove(owner, "a")
			return append(serve(s, false, 2, everyone), string(rune('0'+s.len())))
		}, []string{"b", "b", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s consumerSet
			require.Equal(t, tc.want, tc.steps(&s))
			var all []string
			s.each(func(c *Consumer) { all = append(all, c.Tag) })
			require.Len(t, all, s.len())
			for _, tag := range all {
				s.remove(owner, tag)
			}
			require.Zero(t, s.len())
			require.Empty(t, s.levels)
			require.Nil(t, s.next)
		})
	}
}
