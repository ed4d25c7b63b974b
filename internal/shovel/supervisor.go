package shovel

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"

	"github.com/warrenmq/broker/internal/linkloop"
	"github.com/warrenmq/broker/meta"
)

// Component is the runtime-parameter component a shovel is stored under.
const Component = "shovel"

// Params is what a Supervisor needs of the parameter store: the broker's
// Admin has these verbs.
type Params interface {
	ListParameters(ctx context.Context, component, vhost string) ([]meta.Parameter, error)
	GetParameter(ctx context.Context, component, vhost, name string) (meta.Parameter, error)
	DeleteParameter(ctx context.Context, component, vhost, name string) error
	WatchParameters(component string, fn func(vhost, name string)) (cancel func())
}

// LinkStatus is one link as GET /api/shovels reports it.
type LinkStatus struct {
	VHost, Name string
	Def         Def
	// Node is the broker that runs the link when another one does (its
	// status as that broker last stored it), "" when it runs here.
	Node string
	Status
}

// Supervisor runs one Worker per stored shovel parameter: it starts a
// link when a parameter appears, restarts it when its value changes,
// stops it when the parameter is deleted, and deletes the parameter of a
// link that reached src-delete-after (as RabbitMQ does). One goroutine
// (run) owns the links; Status and Restart ask it under the mutex that
// guards the map it keeps.
type Supervisor struct {
	params Params
	local  Local
	log    *slog.Logger
	placer Placer // nil: every link runs here
	loop   *linkloop.Loop

	mu      sync.Mutex
	pending map[linkKey]bool // told by the watcher, not yet looked at
	links   map[linkKey]*link
	restart map[linkKey]bool
}

type linkKey struct{ vhost, name string }

type link struct {
	value  []byte
	def    Def
	w      *Worker
	cancel context.CancelFunc
	exited chan error
	away   bool // placed: another member runs it (or nobody yet)
}

// NewSupervisor returns a supervisor of the shovels params stores; local
// dials the broker itself for URIs with no host. Start starts it.
func NewSupervisor(params Params, local Local, log *slog.Logger) *Supervisor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Supervisor{params: params, local: local, log: log, loop: linkloop.New(),
		pending: map[linkKey]bool{}, links: map[linkKey]*link{}, restart: map[linkKey]bool{}}
}

// Start watches the shovel parameters, then starts a link for each stored
// one (watching first, so that nothing stored in between is missed).
func (s *Supervisor) Start(ctx context.Context) error {
	unwatch := s.params.WatchParameters(Component, func(vhost, name string) { s.tell(linkKey{vhost, name}) })
	ps, err := s.params.ListParameters(ctx, Component, "")
	if err != nil {
		unwatch()
		return err
	}
	for _, p := range ps {
		s.tell(linkKey{p.VHost, p.Name})
	}
	s.loop.Start(func(ctx context.Context) {
		defer unwatch()
		s.run(ctx)
	})
	return nil
}

// Stop stops every link and waits for them; calling it without Start, or
// twice, does nothing.
func (s *Supervisor) Stop() { s.loop.Stop() }

// tell marks a parameter to look at again and wakes run; it never blocks
// (the watcher must return soon).
func (s *Supervisor) tell(k linkKey) {
	s.mu.Lock()
	s.pending[k] = true
	s.mu.Unlock()
	s.loop.Poke()
}

// Restart stops and starts the link of vhost and name again, as
// DELETE /api/shovels/vhost/{vhost}/{name}/restart does; false when
// there is no such link. Placed through a linkloop.Restarter, the broker
// running the link restarts it wherever this one is, and Restart returns
// once it has (RabbitMQ's rabbit_shovel_mgmt calls rabbit_shovel_util's
// restart_shovel on the node running it); else the link here is told to
// restart and Restart returns at once.
func (s *Supervisor) Restart(ctx context.Context, vhost, name string) (bool, error) {
	k := linkKey{vhost, name}
	s.mu.Lock()
	l, ok := s.links[k]
	listed := ok && (!l.away || s.isReported(k))
	s.mu.Unlock()
	if !listed {
		return false, nil // as GET /api/shovels would not list it
	}
	if placed, running, err := linkloop.Restart(ctx, s.placer, placementName(k)); placed {
		return running, err
	}
	s.mu.Lock()
	_, ok = s.links[k]
	if ok {
		s.restart[k] = true
		s.pending[k] = true
	}
	s.mu.Unlock()
	if ok {
		s.loop.Poke()
	}
	return ok, nil
}

// Status lists the links of vhost ("" for all), sorted by vhost and
// name: those running here, and, placed through a linkloop.Reporter,
// those another broker runs as it last stored their status.
func (s *Supervisor) Status(vhost string) []LinkStatus {
	s.mu.Lock()
	out := make([]LinkStatus, 0, len(s.links))
	for k, l := range s.links {
		if vhost != "" && k.vhost != vhost {
			continue
		}
		if !l.away {
			out = append(out, LinkStatus{VHost: k.vhost, Name: k.name, Def: l.def, Status: l.w.Status()})
		} else if st, node, ok := s.reported(k); ok {
			out = append(out, LinkStatus{VHost: k.vhost, Name: k.name, Def: l.def, Node: node, Status: st})
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].VHost != out[j].VHost {
			return out[i].VHost < out[j].VHost
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// run is the goroutine that owns the links: it reconciles what the
// watcher told and reaps links that ended, until ctx ends.
func (s *Supervisor) run(ctx context.Context) {
	ended := make(chan linkKey, 16)
	var wg sync.WaitGroup
	defer func() {
		s.mu.Lock()
		for _, l := range s.links {
			l.cancel()
		}
		s.mu.Unlock()
		wg.Wait()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.loop.Wake():
			s.reconcile(ctx, &wg, ended)
		case k := <-ended:
			s.reap(ctx, k)
		}
	}
}

// reconcile looks at each parameter told since the last time.
func (s *Supervisor) reconcile(ctx context.Context, wg *sync.WaitGroup, ended chan<- linkKey) {
	s.mu.Lock()
	keys := make([]linkKey, 0, len(s.pending))
	for k := range s.pending {
		keys = append(keys, k)
	}
	clear(s.pending)
	s.mu.Unlock()
	for _, k := range keys {
		p, err := s.params.GetParameter(ctx, Component, k.vhost, k.name)
		if err != nil && !errors.Is(err, meta.ErrNotFound) {
			s.log.Warn("shovel: reading parameter", "vhost", k.vhost, "name", k.name, "err", err)
			s.tell(k) // look again at the next wake-up
			continue
		}
		s.mu.Lock()
		cur := s.links[k]
		again := s.restart[k]
		delete(s.restart, k)
		s.mu.Unlock()
		found := err == nil
		if cur != nil && found && !again && bytes.Equal(cur.value, p.Value) {
			continue // told twice, or a write of the same value
		}
		if cur != nil {
			s.stopLink(k, cur)
		}
		if !found {
			continue
		}
		def, err := Parse(p.Value)
		if err != nil { // stored before a stricter check: say so, run nothing
			s.log.Warn("shovel: stored definition refused", "vhost", k.vhost, "name", k.name, "err", err)
			continue
		}
		s.startLink(ctx, wg, ended, k, p.Value, def)
	}
}

func (s *Supervisor) startLink(ctx context.Context, wg *sync.WaitGroup, ended chan<- linkKey, k linkKey, value []byte, def Def) {
	lctx, cancel := context.WithCancel(ctx)
	l := &link{value: bytes.Clone(value), def: def, w: NewWorker(def, s.local), cancel: cancel, exited: make(chan error, 1),
		away: s.placer != nil}
	s.mu.Lock()
	s.links[k] = l
	s.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := s.runLink(lctx, k, l)
		l.exited <- err
		if errors.Is(err, ErrDone) {
			select {
			case ended <- k:
			case <-ctx.Done():
			}
		}
	}()
}

// stopLink cancels a link and waits for its worker to return.
func (s *Supervisor) stopLink(k linkKey, l *link) {
	l.cancel()
	<-l.exited
	s.mu.Lock()
	if s.links[k] == l {
		delete(s.links, k)
	}
	s.mu.Unlock()
}

// reap deletes the parameter of a link that reached src-delete-after;
// the watcher's call that follows finds it gone and drops the link.
func (s *Supervisor) reap(ctx context.Context, k linkKey) {
	if err := s.params.DeleteParameter(ctx, Component, k.vhost, k.name); err != nil && !errors.Is(err, meta.ErrNotFound) {
		s.log.Warn("shovel: deleting a finished shovel's parameter", "vhost", k.vhost, "name", k.name, "err", err)
	}
	s.tell(k)
}
