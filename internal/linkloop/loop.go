package linkloop

import (
	"context"
	"encoding/json"
)

// Loop is a supervisor's goroutine. The zero value is not ready: use New.
type Loop struct {
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Loop that is not started.
func New() *Loop { return &Loop{wake: make(chan struct{}, 1)} }

// Start runs run on a goroutine of its own with a context that Stop
// ends; run must return soon after it does. Call Start once.
func (l *Loop) Start(run func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		run(ctx)
	}()
}

// Wake is the channel Poke signals, for run's select.
func (l *Loop) Wake() <-chan struct{} { return l.wake }

// Poke wakes run; it never blocks.
func (l *Loop) Poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Stop ends run's context and waits for run to return; calling it
// without Start, or twice, does nothing.
func (l *Loop) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
	l.cancel = nil
}

// Placer runs a named link on exactly one of the brokers that share one
// store (internal/placement's Lease): Run calls fn each time this broker
// acquires name, with a context that ends when it loses it, and returns
// when ctx ends or fn returns while still holding name.
type Placer interface {
	Run(ctx context.Context, name string, fn func(context.Context) error) error
}

// Reporter is a Placer that also shares each link's status among the
// brokers: the holder stores report's value as it runs name, and any
// broker reads the last one stored (internal/placement's Lease).
type Reporter interface {
	Placer
	RunReporting(ctx context.Context, name string, report func() []byte, fn func(context.Context) error) error
	Reported(name string) (node string, status []byte, ok bool)
}

// Restarter is a Placer that can restart a link wherever it runs:
// Restart asks the broker running name to stop it and start it again,
// and returns once it has (internal/placement's Lease); running is false
// when no broker runs name.
type Restarter interface {
	Placer
	Restart(ctx context.Context, name string) (running bool, err error)
}

// Restart restarts name through p when p is a Restarter: placed reports
// whether it was one (when not, the caller restarts the link itself),
// running whether some broker ran name.
func Restart(ctx context.Context, p Placer, name string) (placed, running bool, err error) {
	r, ok := p.(Restarter)
	if !ok {
		return false, false, nil
	}
	running, err = r.Restart(ctx, name)
	return true, running, err
}

// Placed runs fn under name through p: here set true just before each
// run and false after it (the link then runs elsewhere, or nowhere yet).
// With p nil, fn runs once at once with ctx and here is not called. When
// p is a Reporter and report is not nil, the holder stores report's
// value while it runs the link.
func Placed(ctx context.Context, p Placer, name string, here func(bool), report func() []byte, fn func(context.Context) error) error {
	if p == nil {
		return fn(ctx)
	}
	run := p.Run
	if r, ok := p.(Reporter); ok && report != nil {
		run = func(ctx context.Context, name string, fn func(context.Context) error) error {
			return r.RunReporting(ctx, name, report, fn)
		}
	}
	return run(ctx, name, func(hctx context.Context) error {
		here(true)
		defer here(false)
		return fn(hctx)
	})
}

// Reported is name's status (JSON, as its report function stored it)
// as the broker running it last stored it through p, and that broker;
// false when p is not a Reporter or none is known.
func Reported[S any](p Placer, name string) (st S, node string, ok bool) {
	r, ok := p.(Reporter)
	if !ok {
		return st, "", false
	}
	node, b, ok := r.Reported(name)
	if !ok || json.Unmarshal(b, &st) != nil {
		var zero S
		return zero, "", false
	}
	return st, node, true
}
