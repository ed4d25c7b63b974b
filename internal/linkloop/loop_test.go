package linkloop_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/linkloop"
)

func TestLoopStopWaitsForRun(t *testing.T) {
	l := linkloop.New()
	l.Stop() // before Start: nothing
	woken, returned := make(chan struct{}), false
	l.Start(func(ctx context.Context) {
		<-l.Wake()
		close(woken)
		<-ctx.Done()
		returned = true
	})
	l.Poke()
	l.Poke() // a pending wake-up absorbs it: never blocks
	<-woken
	l.Stop()
	require.True(t, returned)
	l.Stop()
}

// onePlacer acquires each name once, with a context of its own.
type onePlacer struct{ names []string }

func (p *onePlacer) Run(ctx context.Context, name string, fn func(context.Context) error) error {
	p.names = append(p.names, name)
	return fn(ctx)
}

func TestPlaced(t *testing.T) {
	boom := errors.New("boom")
	var seen []bool
	here := func(b bool) { seen = append(seen, b) }
	ran := 0
	fn := func(context.Context) error { ran++; return boom }

	require.ErrorIs(t, linkloop.Placed(context.Background(), nil, "x", here, nil, fn), boom)
	require.Equal(t, 1, ran)
	require.Empty(t, seen, "unplaced: here is not called")

	p := &onePlacer{}
	require.ErrorIs(t, linkloop.Placed(context.Background(), p, "shovel/v/n", here, nil, fn), boom)
	require.Equal(t, 2, ran)
	require.Equal(t, []bool{true, false}, seen)
	require.Equal(t, []string{"shovel/v/n"}, p.names)
}

// memReporter keeps what each run reported, as if another broker
// stored it.
type memReporter struct {
	onePlacer
	stored map[string][]byte
}

func (p *memReporter) RunReporting(ctx context.Context, name string, report func() []byte, fn func(context.Context) error) error {
	p.stored[name] = report()
	return p.Run(ctx, name, fn)
}

func (p *memReporter) Reported(name string) (string, []byte, bool) {
	b, ok := p.stored[name]
	return "other", b, ok
}

func TestPlacedReportsThroughAReporter(t *testing.T) {
	type status struct{ State string }
	fn := func(context.Context) error { return nil }
	p := &memReporter{stored: map[string][]byte{}}
	require.NoError(t, linkloop.Placed(context.Background(), p, "x", func(bool) {}, func() []byte { return []byte(`{"State":"running"}`) }, fn))
	st, node, ok := linkloop.Reported[status](p, "x")
	require.True(t, ok)
	require.Equal(t, "other", node)
	require.Equal(t, status{"running"}, st)

	require.NoError(t, linkloop.Placed(context.Background(), p, "bad", func(bool) {}, func() []byte { return []byte(`nope`) }, fn))
	_, _, ok = linkloop.Reported[status](p, "bad")
	require.False(t, ok, "a status that does not decode is not listed")
	_, _, ok = linkloop.Reported[status](p, "none")
	require.False(t, ok)
	_, _, ok = linkloop.Reported[status](&onePlacer{}, "x")
	require.False(t, ok, "a placer that does not report lists nothing")
}
