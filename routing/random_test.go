package routing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// randomWords joins n words drawn from alphabet with dots.
func randomWords(r *rand.Rand, alphabet []string, maxWords int) string {
	n := r.IntN(maxWords + 1)
	w := make([]string, n)
	for i := range w {
		w[i] = alphabet[r.IntN(len(alphabet))]
	}
	return strings.Join(w, ".")
}

// TestTopicRandomAgainstReference builds random topic exchanges, routes
// random keys and compares with naiveTopicMatch over every binding, then
// removes bindings at random (pruning the trie) and compares again. Small
// alphabets with the empty word make collisions and edge cases common.
func TestTopicRandomAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	patternWords := []string{"a", "b", "", "*", "#"}
	keyWords := []string{"a", "b", "", "*"}
	for round := range 200 {
		tb := NewTable()
		mustDeclare(t, tb, Exchange{Name: "t", Kind: Topic})
		for i := range 8 {
			tb.AddQueue(fmt.Sprintf("q%d", i))
		}
		var bound []Binding
		for range 1 + r.IntN(40) {
			b := toQueue("t", fmt.Sprintf("q%d", r.IntN(8)), randomWords(r, patternWords, 5))
			added, err := tb.Bind(b)
			require.NoError(t, err)
			if added {
				bound = append(bound, b)
			}
		}
		check := func(phase string) {
			for range 40 {
				key := randomWords(r, keyWords, 6)
				var want []string
				for _, b := range bound {
					if naiveTopicMatch(b.Key, key) {
						want = append(want, b.Destination.Name)
					}
				}
				slices.Sort(want)
				want = slices.Compact(want)
				if want == nil {
					want = []string{}
				}
				require.Equal(t, want, routeSorted(t, tb, "t", key, nil),
					"round %d (%s): key %q, bindings %v", round, phase, key, bound)
			}
		}
		check("bound")
		r.Shuffle(len(bound), func(i, j int) { bound[i], bound[j] = bound[j], bound[i] })
		for len(bound) > 0 && r.IntN(4) != 0 {
			removed, err := tb.Unbind(bound[0])
			require.NoError(t, err)
			require.True(t, removed)
			bound = bound[1:]
		}
		check("after removals")
		for _, b := range bound {
			_, err := tb.Unbind(b)
			require.NoError(t, err)
		}
		require.True(t, tb.exchanges["t"].topic.leaf(), "round %d: trie not empty after removing everything", round)
	}
}

// FuzzTopicMatch compares the trie with the reference matcher on one
// pattern and key. Run with: go test -fuzz FuzzTopicMatch ./routing
func FuzzTopicMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"a.#.b", "a.x.b"}, {"#", ""}, {"*", ""}, {"", ""}, {"a..b", "a..b"},
		{"#.#", "a"}, {"a.*.#", "a"}, {"#.*", "a.b"}, {"*.#.*", "."},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, key string) {
		// The reference backtracks; keep it away from exponential inputs.
		if strings.Count(pattern, ".") > 12 || strings.Count(key, ".") > 12 {
			t.Skip()
		}
		tb := NewTable()
		require.NoError(t, tb.DeclareExchange(Exchange{Name: "t", Kind: Topic}))
		tb.AddQueue("q")
		_, err := tb.Bind(toQueue("t", "q", pattern))
		require.NoError(t, err)
		got := len(tb.Route("t", key, nil, nil)) == 1
		require.Equal(t, naiveTopicMatch(pattern, key), got, "pattern %q key %q", pattern, key)
	})
}
