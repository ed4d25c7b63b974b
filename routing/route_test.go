package routing

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// topology is a compact description of a table for the e2e and alternate
// exchange cases.
type topology struct {
	exchanges []Exchange
	queues    []string
	bindings  []Binding
}

func (tp topology) build(t *testing.T) *Table {
	t.Helper()
	tb := NewTable()
	tb.DeclareDefaults()
	for _, e := range tp.exchanges {
		mustDeclare(t, tb, e)
	}
	for _, q := range tp.queues {
		tb.AddQueue(q)
	}
	for _, b := range tp.bindings {
		mustBind(t, tb, b)
	}
	return tb
}

func TestRouteExchangeToExchange(t *testing.T) {
	fan := func(n string) Exchange { return Exchange{Name: n, Kind: Fanout} }
	tests := []struct {
		name     string
		tp       topology
		from     string
		key      string
		want     []string
		wantFrom map[string][]string // further publish targets to check
	}{
		{
			name: "chain",
			tp: topology{
				exchanges: []Exchange{{Name: "a", Kind: Topic}, {Name: "b", Kind: Direct}, fan("c")},
				queues:    []string{"qa", "qc"},
				bindings: []Binding{
					toExchange("a", "b", "x.#"), toExchange("b", "c", "x.y"),
					toQueue("a", "qa", "#"), toQueue("c", "qc", ""),
				},
			},
			from: "a", key: "x.y", want: []string{"qa", "qc"},
			wantFrom: map[string][]string{"b": {"qc"}, "c": {"qc"}},
		},
		{
			name: "the key is matched at every hop",
			tp: topology{
				exchanges: []Exchange{{Name: "a", Kind: Topic}, {Name: "b", Kind: Direct}},
				queues:    []string{"q"},
				bindings:  []Binding{toExchange("a", "b", "#"), toQueue("b", "q", "other")},
			},
			from: "a", key: "x", want: []string{},
		},
		{
			name: "diamond reaches the queue once",
			tp: topology{
				exchanges: []Exchange{fan("top"), fan("left"), fan("right"), fan("bottom")},
				queues:    []string{"q", "r"},
				bindings: []Binding{
					toExchange("top", "left", ""), toExchange("top", "right", ""),
					toExchange("left", "bottom", ""), toExchange("right", "bottom", ""),
					toQueue("left", "q", ""), toQueue("right", "q", ""), toQueue("bottom", "q", ""),
					toQueue("bottom", "r", ""),
				},
			},
			from: "top", want: []string{"q", "r"},
		},
		{
			name: "cycle terminates",
			tp: topology{
				exchanges: []Exchange{fan("a"), fan("b"), fan("c")},
				queues:    []string{"qa", "qc"},
				bindings: []Binding{
					toExchange("a", "b", ""), toExchange("b", "c", ""), toExchange("c", "a", ""),
					toQueue("a", "qa", ""), toQueue("c", "qc", ""),
				},
			},
			from: "b", want: []string{"qa", "qc"},
		},
		{
			name: "self binding",
			tp: topology{
				exchanges: []Exchange{fan("a")},
				queues:    []string{"q"},
				bindings:  []Binding{toExchange("a", "a", ""), toQueue("a", "q", "")},
			},
			from: "a", want: []string{"q"},
		},
		{
			name: "into an internal exchange",
			tp: topology{
				exchanges: []Exchange{fan("pub"), {Name: "int", Kind: Direct, Internal: true}},
				queues:    []string{"q"},
				bindings:  []Binding{toExchange("pub", "int", ""), toQueue("int", "q", "k")},
			},
			from: "pub", key: "k", want: []string{"q"},
		},
		{
			name: "into a headers exchange",
			tp: topology{
				exchanges: []Exchange{{Name: "t", Kind: Topic}, {Name: "h", Kind: Headers}},
				queues:    []string{"q"},
				bindings: []Binding{
					toExchange("t", "h", "*"),
					{Source: "h", Destination: Destination{Name: "q"}, Args: map[string]any{"x-match": "any"}},
					{Source: "h", Destination: Destination{Name: "q"}, Args: map[string]any{"k": "v"}},
				},
			},
			from: "t", key: "one", want: []string{"q"},
		},
		{
			name: "many exchanges reached",
			tp: func() topology {
				tp := topology{exchanges: []Exchange{fan("root")}, queues: []string{"q"}}
				for i := range 3 * seenSetThreshold {
					n := fmt.Sprintf("x%03d", i)
					tp.exchanges = append(tp.exchanges, fan(n))
					tp.bindings = append(tp.bindings, toExchange("root", n, ""), toExchange(n, "root", ""), toQueue(n, "q", ""))
					if i > 0 {
						tp.bindings = append(tp.bindings, toExchange(n, fmt.Sprintf("x%03d", i-1), ""))
					}
				}
				return tp
			}(),
			from: "root", want: []string{"q"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := tt.tp.build(t)
			require.Equal(t, tt.want, routeSorted(t, tb, tt.from, tt.key, map[string]any{"k": "v"}))
			for from, want := range tt.wantFrom {
				require.Equal(t, want, routeSorted(t, tb, from, tt.key, nil), "from %s", from)
			}
		})
	}
}

func TestRouteAlternateExchange(t *testing.T) {
	direct := func(n, ae string) Exchange { return Exchange{Name: n, Kind: Direct, AlternateExchange: ae} }
	tests := []struct {
		name string
		tp   topology
		from string
		key  string
		want []string
	}{
		{
			name: "used when nothing matches",
			tp: topology{
				exchanges: []Exchange{direct("x", "ae"), {Name: "ae", Kind: Fanout}},
				queues:    []string{"q", "unrouted"},
				bindings:  []Binding{toQueue("x", "q", "k"), toQueue("ae", "unrouted", "")},
			},
			from: "x", key: "other", want: []string{"unrouted"},
		},
		{
			name: "not used when a queue matches",
			tp: topology{
				exchanges: []Exchange{direct("x", "ae"), {Name: "ae", Kind: Fanout}},
				queues:    []string{"q", "unrouted"},
				bindings:  []Binding{toQueue("x", "q", "k"), toQueue("ae", "unrouted", "")},
			},
			from: "x", key: "k", want: []string{"q"},
		},
		{
			name: "not used when an exchange matches, even one that routes nowhere",
			tp: topology{
				exchanges: []Exchange{direct("x", "ae"), direct("empty", ""), {Name: "ae", Kind: Fanout}},
				queues:    []string{"unrouted"},
				bindings:  []Binding{toExchange("x", "empty", "k"), toQueue("ae", "unrouted", "")},
			},
			from: "x", key: "k", want: []string{},
		},
		{
			name: "an e2e destination's own alternate is used",
			tp: topology{
				exchanges: []Exchange{direct("x", "ae1"), direct("y", "ae2"), {Name: "ae1", Kind: Fanout}, {Name: "ae2", Kind: Fanout}},
				queues:    []string{"u1", "u2"},
				bindings:  []Binding{toExchange("x", "y", "k"), toQueue("ae1", "u1", ""), toQueue("ae2", "u2", "")},
			},
			from: "x", key: "k", want: []string{"u2"},
		},
		{
			name: "alternate of an alternate",
			tp: topology{
				exchanges: []Exchange{direct("x", "ae1"), direct("ae1", "ae2"), {Name: "ae2", Kind: Fanout}},
				queues:    []string{"u"},
				bindings:  []Binding{toQueue("ae2", "u", "")},
			},
			from: "x", key: "k", want: []string{"u"},
		},
		{
			name: "alternate matched by key",
			tp: topology{
				exchanges: []Exchange{direct("x", "ae"), {Name: "ae", Kind: Topic}},
				queues:    []string{"u", "v"},
				bindings:  []Binding{toQueue("ae", "u", "a.*"), toQueue("ae", "v", "b.*")},
			},
			from: "x", key: "a.z", want: []string{"u"},
		},
		{
			name: "alternate cycle terminates",
			tp: topology{
				exchanges: []Exchange{direct("x", "y"), direct("y", "z"), direct("z", "x")},
				queues:    []string{"q"},
			},
			from: "x", key: "k", want: []string{},
		},
		{
			name: "alternate is itself",
			tp: topology{
				exchanges: []Exchange{direct("x", "x")},
			},
			from: "x", key: "k", want: []string{},
		},
		{
			name: "alternate cycle with a way out",
			tp: topology{
				exchanges: []Exchange{direct("x", "y"), direct("y", "x")},
				queues:    []string{"q"},
				bindings:  []Binding{toQueue("y", "q", "k")},
			},
			from: "x", key: "k", want: []string{"q"},
		},
		{
			name: "missing alternate is ignored",
			tp: topology{
				exchanges: []Exchange{direct("x", "nowhere")},
			},
			from: "x", key: "k", want: []string{},
		},
		{
			name: "internal alternate",
			tp: topology{
				exchanges: []Exchange{direct("x", "ae"), {Name: "ae", Kind: Fanout, Internal: true}},
				queues:    []string{"u"},
				bindings:  []Binding{toQueue("ae", "u", "")},
			},
			from: "x", key: "k", want: []string{"u"},
		},
		{
			name: "alternate reaching a queue the e2e path reached too",
			tp: topology{
				exchanges: []Exchange{{Name: "f", Kind: Fanout}, direct("d", "ae"), {Name: "ae", Kind: Fanout}},
				queues:    []string{"q"},
				bindings:  []Binding{toExchange("f", "d", ""), toQueue("f", "q", ""), toQueue("ae", "q", "")},
			},
			from: "f", key: "k", want: []string{"q"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := tt.tp.build(t)
			require.Equal(t, tt.want, routeSorted(t, tb, tt.from, tt.key, nil))
		})
	}
}

func TestRouteAlternateDeclaredLater(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Direct, AlternateExchange: "ae"})
	tb.AddQueue("u")
	require.Equal(t, []string{}, routeSorted(t, tb, "x", "k", nil))
	mustDeclare(t, tb, Exchange{Name: "ae", Kind: Fanout})
	mustBind(t, tb, toQueue("ae", "u", ""))
	require.Equal(t, []string{"u"}, routeSorted(t, tb, "x", "k", nil))
	_, err := tb.DeleteExchange("ae")
	require.NoError(t, err)
	e, _ := tb.Exchange("x")
	require.Equal(t, "ae", e.AlternateExchange, "the name stays")
	require.Equal(t, []string{}, routeSorted(t, tb, "x", "k", nil))
}

func TestRouteMissingExchangeAndAppend(t *testing.T) {
	tb := NewTable()
	tb.DeclareDefaults()
	tb.AddQueue("q")
	require.Empty(t, tb.Route("nope", "q", nil, nil))

	// Route appends after what dst holds and leaves that alone, also when
	// it deduplicates.
	mustBind(t, tb, toQueue("amq.topic", "q", "#"))
	mustBind(t, tb, toQueue("amq.topic", "q", "a"))
	dst := []string{"zz", "q"}
	dst = tb.Route("amq.topic", "a", nil, dst)
	require.Equal(t, []string{"zz", "q", "q"}, dst)
}

// TestRouteConcurrentReaders runs many Route calls at once, as the broker
// does under its read lock; with -race it checks that Route writes nothing
// shared.
func TestRouteConcurrentReaders(t *testing.T) {
	tb := NewTable()
	tb.DeclareDefaults()
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Topic, AlternateExchange: "amq.fanout"})
	mustDeclare(t, tb, Exchange{Name: "y", Kind: Fanout})
	for i := range 20 {
		q := fmt.Sprintf("q%d", i)
		tb.AddQueue(q)
		mustBind(t, tb, toQueue("x", q, fmt.Sprintf("#.k%d.#", i%5)))
		mustBind(t, tb, toQueue("y", q, ""))
		mustBind(t, tb, toQueue("amq.headers", q, ""))
	}
	mustBind(t, tb, toExchange("x", "y", "*.all"))
	tb.AddQueue("dead")
	mustBind(t, tb, toQueue("amq.fanout", "dead", ""))

	type result struct {
		key string
		got []string
	}
	keys := []string{"a.k1.b", "k2.k3", "x.all", "none", ""}
	want := map[string][]string{}
	for _, k := range keys {
		want[k] = routeSorted(t, tb, "x", k, nil)
	}
	results := make(chan result, 8*len(keys)*50)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]string, 0, 32)
			for i := range 50 * len(keys) {
				k := keys[(g+i)%len(keys)]
				got := append([]string(nil), tb.Route("x", k, nil, buf[:0])...)
				_ = tb.Route("amq.headers", k, map[string]any{"a": 1}, buf[:0])
				results <- result{k, got}
			}
		}()
	}
	wg.Wait()
	close(results)
	for r := range results {
		require.ElementsMatch(t, want[r.key], r.got, "key %q", r.key)
	}
	require.Len(t, want["x.all"], 20)
	require.Equal(t, []string{"dead"}, want["none"])
}

func TestRouteKeys(t *testing.T) {
	tp := topology{
		exchanges: []Exchange{
			{Name: "d", Kind: Direct, AlternateExchange: "ae"}, {Name: "t", Kind: Topic},
			{Name: "f", Kind: Fanout}, {Name: "ae", Kind: Fanout}, {Name: "e2e", Kind: Direct},
		},
		queues: []string{"q1", "q2", "q3", "unrouted"},
		bindings: []Binding{
			toQueue("d", "q1", "k1"), toQueue("d", "q2", "k2"), toQueue("d", "q2", "k3"),
			toQueue("t", "q1", "a.*"), toQueue("t", "q2", "*.b"), toQueue("t", "q3", "c.#"),
			toQueue("f", "q1", ""), toQueue("ae", "unrouted", ""),
			toExchange("e2e", "d", "hop"),
		},
	}
	tests := []struct {
		name     string
		exchange string
		key      string
		more     []string
		want     []string
	}{
		{name: "direct: every key's queues", exchange: "d", key: "k1", more: []string{"k2"}, want: []string{"q1", "q2"}},
		{name: "direct: a queue two keys reach is listed once", exchange: "d", key: "k2", more: []string{"k3", "k2"}, want: []string{"q2"}},
		{name: "direct: only an extra key matches, so no alternate", exchange: "d", key: "none", more: []string{"k1"}, want: []string{"q1"}},
		{name: "direct: no key matches, so the alternate", exchange: "d", key: "none", more: []string{"nor"}, want: []string{"unrouted"}},
		{name: "topic", exchange: "t", key: "a.x", more: []string{"y.b", "c.d.e", "a.b"}, want: []string{"q1", "q2", "q3"}},
		{name: "fanout ignores the keys", exchange: "f", key: "x", more: []string{"y", "z"}, want: []string{"q1"}},
		{name: "default exchange: a key per queue", exchange: "", key: "q1", more: []string{"q3", "missing", "q1"}, want: []string{"q1", "q3"}},
		{name: "the keys cross an e2e binding", exchange: "e2e", key: "hop", more: []string{"k1", "k2"}, want: []string{"q1", "q2"}},
		{name: "no extra keys is Route", exchange: "d", key: "k1", want: []string{"q1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := tp.build(t)
			got := tb.RouteKeys(tt.exchange, tt.key, tt.more, nil, nil)
			slices.Sort(got)
			if got == nil {
				got = []string{}
			}
			require.Equal(t, tt.want, got)
		})
	}
}
