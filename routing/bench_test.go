package routing

import (
	"fmt"
	"testing"
)

// BenchmarkRouteTopic routes one message through a topic exchange holding
// n bindings. The patterns mix literal, '*' and '#' words the way
// application topics do ("region.service.*", "#.service"); the key matches
// two of them. Cost should stay flat as n grows: the trie visits only the
// states that can match.
func BenchmarkRouteTopic(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		b.Run(fmt.Sprintf("bindings=%d", n), func(b *testing.B) {
			tb := NewTable()
			if err := tb.DeclareExchange(Exchange{Name: "t", Kind: Topic}); err != nil {
				b.Fatal(err)
			}
			for i := range n {
				q := fmt.Sprintf("q%d", i)
				tb.AddQueue(q)
				var pattern string
				switch i % 4 {
				case 0:
					pattern = fmt.Sprintf("#.svc%d", i)
				case 1:
					pattern = fmt.Sprintf("r%d.svc%d.#", i%16, i)
				default:
					pattern = fmt.Sprintf("r%d.svc%d.*", i%16, i)
				}
				if _, err := tb.Bind(toQueue("t", q, pattern)); err != nil {
					b.Fatal(err)
				}
			}
			// i=6: "r6.svc6.*" matches; i=5: "r5.svc5.#" is unrelated.
			key := "r6.svc6.info"
			dst := make([]string, 0, 16)
			if got := tb.Route("t", key, nil, dst); len(got) != 1 {
				b.Fatalf("routed to %v", got)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				dst = tb.Route("t", key, nil, dst[:0])
			}
		})
	}
}

// BenchmarkRouteTopicWildcardHeavy routes through 1,000 patterns that all
// start with '#', the worst shape for a trie walk: '#' is tried at every
// word of the key.
func BenchmarkRouteTopicWildcardHeavy(b *testing.B) {
	tb := NewTable()
	if err := tb.DeclareExchange(Exchange{Name: "t", Kind: Topic}); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		q := fmt.Sprintf("q%d", i)
		tb.AddQueue(q)
		if _, err := tb.Bind(toQueue("t", q, fmt.Sprintf("#.w%d.#.w%d", i%50, i%7))); err != nil {
			b.Fatal(err)
		}
	}
	key := "w1.x.w2.y.w3.z.w4.w5"
	dst := make([]string, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		dst = tb.Route("t", key, nil, dst[:0])
	}
}

func BenchmarkRouteFanout(b *testing.B) {
	tb := NewTable()
	if err := tb.DeclareExchange(Exchange{Name: "f", Kind: Fanout}); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		q := fmt.Sprintf("q%d", i)
		tb.AddQueue(q)
		if _, err := tb.Bind(toQueue("f", q, "")); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([]string, 0, 1000)
	b.ReportAllocs()
	for b.Loop() {
		dst = tb.Route("f", "", nil, dst[:0])
	}
	if len(dst) != 1000 {
		b.Fatalf("routed to %d queues", len(dst))
	}
}

func BenchmarkRouteDirect(b *testing.B) {
	tb := NewTable()
	if err := tb.DeclareExchange(Exchange{Name: "d", Kind: Direct}); err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		q := fmt.Sprintf("q%d", i)
		tb.AddQueue(q)
		if _, err := tb.Bind(toQueue("d", q, fmt.Sprintf("key%d", i))); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([]string, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		dst = tb.Route("d", "key4242", nil, dst[:0])
	}
	if len(dst) != 1 {
		b.Fatalf("routed to %v", dst)
	}
}

func BenchmarkRouteDefault(b *testing.B) {
	tb := NewTable()
	tb.DeclareDefaults()
	for i := range 10000 {
		tb.AddQueue(fmt.Sprintf("q%d", i))
	}
	dst := make([]string, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		dst = tb.Route("", "q4242", nil, dst[:0])
	}
}

// BenchmarkRouteHeaders matches a message with five headers against 100
// bindings of two or three arguments each, all and any mixed.
func BenchmarkRouteHeaders(b *testing.B) {
	tb := NewTable()
	if err := tb.DeclareExchange(Exchange{Name: "h", Kind: Headers}); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		q := fmt.Sprintf("q%d", i)
		tb.AddQueue(q)
		args := map[string]any{
			"format": fmt.Sprintf("f%d", i%10),
			"region": int32(i % 7),
		}
		if i%2 == 0 {
			args["x-match"] = "any"
			args["tier"] = "gold"
		}
		if _, err := tb.Bind(Binding{Source: "h", Destination: Destination{Name: q}, Args: args}); err != nil {
			b.Fatal(err)
		}
	}
	headers := map[string]any{"format": "f3", "region": int64(3), "tier": "silver", "id": "abc", "x-retry": int32(1)}
	dst := make([]string, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		dst = tb.Route("h", "", headers, dst[:0])
	}
}

// BenchmarkRouteExchangeChain routes through three exchanges (topic ->
// direct -> fanout of 10 queues) with an alternate on the last hop unused.
func BenchmarkRouteExchangeChain(b *testing.B) {
	tb := NewTable()
	for _, e := range []Exchange{{Name: "a", Kind: Topic}, {Name: "b", Kind: Direct}, {Name: "c", Kind: Fanout, AlternateExchange: "ae"}, {Name: "ae", Kind: Fanout}} {
		if err := tb.DeclareExchange(e); err != nil {
			b.Fatal(err)
		}
	}
	must := func(_ bool, err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(tb.Bind(toExchange("a", "b", "orders.#")))
	must(tb.Bind(toExchange("b", "c", "orders.eu.new")))
	for i := range 10 {
		q := fmt.Sprintf("q%d", i)
		tb.AddQueue(q)
		must(tb.Bind(toQueue("c", q, "")))
	}
	dst := make([]string, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		dst = tb.Route("a", "orders.eu.new", nil, dst[:0])
	}
	if len(dst) != 10 {
		b.Fatalf("routed to %v", dst)
	}
}

// BenchmarkDeclareBind measures topology churn: declaring an exchange and
// binding a queue to it, and binding distinct patterns to one topic
// exchange that already holds many.
func BenchmarkDeclareBind(b *testing.B) {
	names := make([]string, 1<<16)
	for i := range names {
		names[i] = fmt.Sprintf("n%d.x%d.*", i%97, i)
	}
	b.Run("declare+bind", func(b *testing.B) {
		tb := NewTable()
		tb.AddQueue("q")
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			name := names[i%len(names)]
			if i%len(names) == 0 {
				tb = NewTable()
				tb.AddQueue("q")
			}
			i++
			if err := tb.DeclareExchange(Exchange{Name: name, Kind: Direct}); err != nil {
				b.Fatal(err)
			}
			if _, err := tb.Bind(toQueue(name, "q", "k")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bind topic", func(b *testing.B) {
		tb := NewTable()
		tb.AddQueue("q")
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i%len(names) == 0 {
				tb = NewTable()
				tb.AddQueue("q")
				if err := tb.DeclareExchange(Exchange{Name: "t", Kind: Topic}); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := tb.Bind(toQueue("t", "q", names[i%len(names)])); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
