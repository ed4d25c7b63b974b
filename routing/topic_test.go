package routing

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// topicMatches binds pattern on a fresh topic exchange and routes key.
func topicMatches(t *testing.T, pattern, key string) bool {
	t.Helper()
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "t", Kind: Topic})
	tb.AddQueue("q")
	mustBind(t, tb, toQueue("t", "q", pattern))
	got := tb.Route("t", key, nil, nil)
	require.LessOrEqual(t, len(got), 1)
	return len(got) == 1
}

func TestTopicMatching(t *testing.T) {
	tests := []struct {
		pattern, key string
		want         bool
	}{
		// literal words
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.b", "a.b.c", false},
		{"a.b.c", "a.b", false},
		{"a", "a", true},
		{"a#", "a#", true}, // wildcards are whole words only
		{"a#", "ab", false},
		{"a*", "ab", false},
		// '*' is exactly one word
		{"*", "a", true},
		{"*", "a.b", false},
		{"*", ".", false}, // "." is two empty words
		{"*.*", ".", true},
		{"a.*", "a.", true}, // the empty word after the dot
		{"a.*", "a", false},
		{"*.b", ".b", true},
		{"a.*.b", "a..b", true},
		{"a.*.*", "a.b", false},
		// '#' is zero or more words
		{"#", "a", true},
		{"#", "a.b.c", true},
		{"#", ".", true},
		{"a.#", "a", true},
		{"a.#", "a.b", true},
		{"a.#", "a.b.c", true},
		{"a.#", "b.a", false},
		{"a.#", "ab", false},
		{"#.a", "a", true},
		{"#.a", "b.c.a", true},
		{"#.a", "a.b", false},
		{"a.#.b", "a.b", true},
		{"a.#.b", "a.x.b", true},
		{"a.#.b", "a.x.y.b", true},
		{"a.#.b", "a.b.b", true},
		{"a.#.b", "a.b.c", false},
		{"a.#.b", "b", false},
		{"#.b.#", "b", true},
		{"#.b.#", "a.b.c", true},
		{"#.b.#", "a.c", false},
		{"#.#", "a", true},
		{"#.#", "a.b.c", true},
		{"#.*", "a", true},
		{"#.*", "a.b", true},
		{"*.#", "a", true},
		{"a.*.#", "a", false},
		{"a.*.#", "a.b", true},
		{"a.*.#", "a.b.c.d", true},
		{"#.*.#", "a", true},
		// empty words are words
		{"a..b", "a..b", true},
		{"a..b", "a.b", false},
		{"a.b", "a..b", false},
		{"a.", "a.", true},
		{"a.", "a", false},
		{".a", ".a", true},
		{"#..#", "a..b", true},
		{"#..#", "a.b", false},
		// The empty key is zero words (RabbitMQ's split_topic_key): only
		// "", "#" and patterns of '#' alone match it.
		{"", "", true},
		{"#", "", true},
		{"#.#", "", true},
		{"*", "", false},
		{"#.*", "", false},
		{"", "a", false},
		{"", ".", false},
		{"a", "", false},
		// A literal '*' or '#' in the routing key is just a word.
		{"a.*", "a.*", true},
		{"a.b", "a.*", false},
		{"a.b", "a.#", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%q", tt.pattern, tt.key), func(t *testing.T) {
			require.Equal(t, tt.want, topicMatches(t, tt.pattern, tt.key))
			// The reference matcher agrees, so the randomized test below
			// compares against something that is itself checked.
			require.Equal(t, tt.want, naiveTopicMatch(tt.pattern, tt.key))
		})
	}
}

func TestTopicManyHashesTerminate(t *testing.T) {
	// 30 '#' words against a 60-word key that never matches: a naive
	// backtracking matcher would explore C(90,30) paths; the memoised walk
	// visits each (node, word) state once.
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "t", Kind: Topic})
	tb.AddQueue("q")
	tb.AddQueue("r")
	mustBind(t, tb, toQueue("t", "q", strings.Repeat("#.", 30)+"x"))
	mustBind(t, tb, toQueue("t", "r", strings.Repeat("#.", 30)+"a"))
	key := strings.TrimSuffix(strings.Repeat("a.", 60), ".")
	require.Equal(t, []string{"r"}, routeSorted(t, tb, "t", key, nil))
}

func TestTopicOverlappingPatternsRouteOnce(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "t", Kind: Topic})
	for _, q := range []string{"q1", "q2"} {
		tb.AddQueue(q)
	}
	for _, p := range []string{"a.b", "a.*", "*.b", "#", "a.#", "#.b", "#.#"} {
		mustBind(t, tb, toQueue("t", "q1", p))
	}
	mustBind(t, tb, toQueue("t", "q2", "a.b"))
	require.Equal(t, []string{"q1", "q2"}, routeSorted(t, tb, "t", "a.b", nil))
	require.Equal(t, []string{"q1"}, routeSorted(t, tb, "t", "a.c", nil))
}

func TestTopicRemovalPrunesTrie(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "t", Kind: Topic})
	tb.AddQueue("q")
	patterns := []string{"a.b.c", "a.*.c", "a.#", "#", "", "*.x.#.y", "a..b"}
	for _, p := range patterns {
		mustBind(t, tb, toQueue("t", "q", p))
	}
	for _, p := range patterns {
		removed, err := tb.Unbind(toQueue("t", "q", p))
		require.NoError(t, err)
		require.True(t, removed, p)
	}
	root := tb.exchanges["t"].topic
	require.True(t, root.leaf(), "trie not pruned: %+v", root)
	require.Empty(t, tb.Route("t", "a.b.c", nil, nil))
}

// naiveTopicMatch is the reference: the definition of topic matching by
// backtracking over word lists, with RabbitMQ's word splitting.
func naiveTopicMatch(pattern, key string) bool {
	words := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ".")
	}
	var match func(p, k []string) bool
	match = func(p, k []string) bool {
		if len(p) == 0 {
			return len(k) == 0
		}
		switch p[0] {
		case "#":
			for i := 0; i <= len(k); i++ {
				if match(p[1:], k[i:]) {
					return true
				}
			}
			return false
		case "*":
			return len(k) > 0 && match(p[1:], k[1:])
		default:
			return len(k) > 0 && k[0] == p[0] && match(p[1:], k[1:])
		}
	}
	return match(words(pattern), words(key))
}

func TestTopicManyHashNodes(t *testing.T) {
	// 60 patterns "#.aN.#" put 60 distinct '#' nodes in reach of one key,
	// past the point where the walk indexes its '#' marks in a map.
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "t", Kind: Topic})
	var words, want []string
	for i := range 2 * markIndexThreshold {
		q := fmt.Sprintf("q%02d", i)
		tb.AddQueue(q)
		mustBind(t, tb, toQueue("t", q, fmt.Sprintf("#.a%d.#", i)))
		mustBind(t, tb, toQueue("t", q, fmt.Sprintf("#.a%d.#.a%d", i, i)))
		if i%3 != 0 {
			words = append(words, fmt.Sprintf("a%d", i))
			want = append(want, q)
		}
	}
	// "#.#.zz" re-enters its second '#' from every offset of the first,
	// after the marks are indexed.
	tb.AddQueue("zz")
	mustBind(t, tb, toQueue("t", "zz", "#.#.zz"))
	key := strings.Join(words, ".")
	require.Equal(t, want, routeSorted(t, tb, "t", key, nil))
	require.Equal(t, append(want, "zz"), routeSorted(t, tb, "t", key+".zz", nil))
	for _, b := range tb.Bindings() {
		if b.Key[len(b.Key)-1] == '#' { // "#.aN.#", not "#.aN.#.aN"
			require.Equal(t, slices.Contains(want, b.Destination.Name), naiveTopicMatch(b.Key, key), b.Key)
		}
	}
}
