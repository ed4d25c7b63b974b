package routing

import "strings"

// topicNode is one node of a topic exchange's trie over binding-key words.
// A binding with key "a.*.#" lives in the destList of the node reached from
// the root by the edges "a", "*", "#". The wildcard edges have their own
// fields so routing tries them without a map lookup.
type topicNode struct {
	parent *topicNode
	word   string // the edge from parent: a literal word, "*" or "#"
	words  map[string]*topicNode
	star   *topicNode
	hash   *topicNode
	dests  destList
}

func (n *topicNode) leaf() bool {
	return n.dests.empty() && len(n.words) == 0 && n.star == nil && n.hash == nil
}

// splitWords calls f for each '.'-separated word of key. As in RabbitMQ
// (rabbit_db_topic_exchange:split_topic_key), "" has no words at all, while
// every other key has one more word than it has dots: "a..b" is "a", "", "b"
// and "a." is "a", "".
func splitWords(key string, f func(w string)) {
	if key == "" {
		return
	}
	for {
		i := strings.IndexByte(key, '.')
		if i < 0 {
			f(key)
			return
		}
		f(key[:i])
		key = key[i+1:]
	}
}

// topicInsert adds one binding of pattern to k below root, creating nodes.
func topicInsert(root *topicNode, pattern string, k destKey, x *exchange) {
	n := root
	splitWords(pattern, func(w string) {
		var next **topicNode
		switch w {
		case "*":
			next = &n.star
		case "#":
			next = &n.hash
		default:
			if c := n.words[w]; c != nil {
				n = c
				return
			}
			if n.words == nil {
				n.words = make(map[string]*topicNode)
			}
			c := &topicNode{parent: n, word: w}
			n.words[w] = c
			n = c
			return
		}
		if *next == nil {
			*next = &topicNode{parent: n, word: w}
		}
		n = *next
	})
	n.dests.add(k, x)
}

// topicRemove drops one binding of pattern to k and prunes the nodes it
// leaves empty, so a trie that churns does not grow without bound.
func topicRemove(root *topicNode, pattern string, k destKey) {
	n := root
	splitWords(pattern, func(w string) {
		if n == nil {
			return
		}
		switch w {
		case "*":
			n = n.star
		case "#":
			n = n.hash
		default:
			n = n.words[w]
		}
	})
	if n == nil {
		return
	}
	n.dests.remove(k)
	for n != root && n.leaf() {
		p := n.parent
		switch {
		case p.star == n:
			p.star = nil
		case p.hash == n:
			p.hash = nil
		default:
			delete(p.words, n.word)
			if len(p.words) == 0 {
				p.words = nil
			}
		}
		n.parent = nil
		n = p
	}
}

// topicSpan is a pending piece of trie walk: node n is to be matched against
// the key's remaining words starting at every word offset p with
// lo <= p < hi. Word edges and '*' push spans holding one offset; a '#'
// edge pushes the whole run of offsets it can skip to, so the stack stays
// short however many words '#' may swallow.
type topicSpan struct {
	n      *topicNode
	lo, hi int
}

// hashMark records the lowest offset at which a '#' node has been entered
// during one match. Entering it at p implies visiting it at every later
// offset too, so the visited set of a '#' node is always a suffix and one
// integer describes it.
type hashMark struct {
	n  *topicNode
	lo int
}

// markIndexThreshold is the number of '#' nodes one match may reach before
// it indexes them in a map rather than scanning a list.
const markIndexThreshold = 32

// matchTopic appends the destinations of every binding of x whose pattern
// matches key, walking the trie like RabbitMQ's trie_match: at each node try
// the literal next word, '*' (exactly one word) and '#' (zero or more).
//
// Offsets: a word is addressed by the byte offset where it starts; the
// offset after the last word is done = len(key)+1, so "no words left" has an
// offset too and offsets grow with the word index. Every state (node,
// offset) is visited at most once: a literal or '*' child has a single
// parent state, and '#' nodes are deduplicated through hashMark. Work is
// therefore bounded by the states that can match, never by the number of
// unrelated bindings, and patterns like "#.#.#" cannot blow up.
//
// matchTopic only reads the trie; its scratch space lives on its own stack
// frame (and on the heap only for unusually long keys).
func (x *exchange) matchTopic(key string, dst []string, seen []*exchange, w *walk) ([]string, []*exchange) {
	done := len(key) + 1
	start := 0
	if key == "" {
		start = done
	}
	var stackBuf [16]topicSpan
	var markBuf [8]hashMark
	stack := append(stackBuf[:0], topicSpan{n: x.topic, lo: start, hi: start + 1})
	marks := markBuf[:0]
	var markIndex map[*topicNode]int // indexes marks once there are many
	for len(stack) > 0 {
		top := len(stack) - 1
		sp := stack[top]
		p := sp.lo
		end := len(key) // end of the word at p
		if p < done {
			if i := strings.IndexByte(key[p:], '.'); i >= 0 {
				end = p + i
			}
		}
		if next := end + 1; p < done && next < sp.hi {
			stack[top].lo = next
		} else {
			stack = stack[:top]
		}

		n := sp.n
		if p == done {
			dst, seen = w.collect(&n.dests, dst, seen)
		} else {
			next := end + 1
			if c := n.words[key[p:end]]; c != nil {
				stack = append(stack, topicSpan{n: c, lo: next, hi: next + 1})
			}
			if n.star != nil {
				stack = append(stack, topicSpan{n: n.star, lo: next, hi: next + 1})
			}
		}
		if h := n.hash; h != nil {
			// h is already covered from offset covered on (done+1: not at
			// all); push only the offsets below that.
			at := -1
			if markIndex != nil {
				if i, ok := markIndex[h]; ok {
					at = i
				}
			} else {
				for i := range marks {
					if marks[i].n == h {
						at = i
						break
					}
				}
			}
			covered := done + 1
			if at >= 0 {
				covered = marks[at].lo
			}
			if p < covered {
				stack = append(stack, topicSpan{n: h, lo: p, hi: covered})
				if at >= 0 {
					// Depth-first order makes a node's offsets arrive in
					// ascending order, so this does not happen today; it
					// keeps the walk correct in any order.
					marks[at].lo = p
				} else {
					marks = append(marks, hashMark{n: h, lo: p})
					if markIndex != nil {
						markIndex[h] = len(marks) - 1
					} else if len(marks) > markIndexThreshold {
						markIndex = make(map[*topicNode]int, 2*len(marks))
						for i := range marks {
							markIndex[marks[i].n] = i
						}
					}
				}
			}
		}
	}
	return dst, seen
}
