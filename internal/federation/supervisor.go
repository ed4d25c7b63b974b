package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/internal/linkloop"
	"github.com/warrenmq/broker/internal/shovel"
	"github.com/warrenmq/broker/meta"
)

// Params is what a Supervisor needs of the parameter store: the broker's
// Admin has these verbs.
type Params interface {
	ListParameters(ctx context.Context, component, vhost string) ([]meta.Parameter, error)
	WatchParameters(component string, fn func(vhost, name string)) (cancel func())
}

// Placer runs a named link on exactly one of the brokers that share one
// store (linkloop.Placer).
type Placer = linkloop.Placer

// Config is a Supervisor's.
type Config struct {
	Host   Host
	Params Params
	// Local dials the broker itself: the links' local ends, and
	// upstream URIs with no host.
	Local shovel.Local
	Log   *slog.Logger
	// Placer, when set, runs each link on one broker of those sharing
	// the store; Status then lists the links running here, and, when
	// Placer is a linkloop.Reporter, those another broker runs as it
	// last stored their status. nil: every link runs here.
	Placer Placer
	// Poll is a quarter of how often the supervisor looks at the
	// policies and the objects they federate; 0 means DefaultPoll.
	Poll time.Duration
	// Reread is how often a link reads its local exchange's bindings or
	// its queue's demand again although Host.Watch told nothing: the
	// safety net under the events, for a change they missed; 0 means
	// DefaultReread.
	Reread time.Duration
}

// DefaultPoll is Config.Poll's default.
const DefaultPoll = 250 * time.Millisecond

// DefaultReread is Config.Reread's default. The links follow the events
// Host.Watch pokes them with, so the re-read only bounds how long a
// missed one could leave a link behind; it costs one read of the
// exchange's bindings or the queue's counts per link each time.
const DefaultReread = 30 * time.Second

// LinkStatus is one link as GET /api/federation-links reports it.
type LinkStatus struct {
	LinkKey
	// UpstreamName is the upstream exchange or queue.
	UpstreamName string
	ConsumerTag  string
	// ID is the link's identity in the API (a hash of its key).
	ID string
	// Node is the broker that runs the link when another one does (its
	// status as that broker last stored it), "" when it runs here.
	Node string
	Status
}

// Supervisor runs a link for each upstream of each federated exchange
// and queue: it starts a link when a policy comes to federate an object
// (or an upstream it names appears), restarts it when the upstream's
// settings change, and stops it when the policy, the object or the
// upstream goes. One goroutine (run) owns the links; Status reads them
// under the mutex that guards the map.
type Supervisor struct {
	cfg  Config
	env  *env
	loop *linkloop.Loop

	mu    sync.Mutex
	dirty bool // a parameter changed since run last read them
	links map[LinkKey]*running
	// restart holds the links Restart asked run to stop and start again.
	restart map[LinkKey]bool
}

type running struct {
	l      *link
	away   atomic.Bool // placed, and another broker runs it (or none yet)
	spec   string      // what the link was started from, to see a change
	cancel context.CancelFunc
	exited chan struct{}
}

// NewSupervisor returns a supervisor; Start starts it.
func NewSupervisor(cfg Config) *Supervisor {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Reread <= 0 {
		cfg.Reread = DefaultReread
	}
	return &Supervisor{cfg: cfg, env: &env{host: cfg.Host, local: cfg.Local, reread: cfg.Reread, now: time.Now},
		loop: linkloop.New(), dirty: true, links: map[LinkKey]*running{}, restart: map[LinkKey]bool{}}
}

// PlaceWith makes the supervisor run each link through p (Config.Placer);
// call it before Start.
func (s *Supervisor) PlaceWith(p Placer) { s.cfg.Placer = p }

// Start watches the federation parameters and starts the goroutine that
// runs the links.
func (s *Supervisor) Start() {
	u1 := s.cfg.Params.WatchParameters(ComponentUpstream, func(string, string) { s.tell() })
	u2 := s.cfg.Params.WatchParameters(ComponentUpstreamSet, func(string, string) { s.tell() })
	s.loop.Start(func(ctx context.Context) {
		defer u1()
		defer u2()
		s.run(ctx)
	})
}

// Stop stops every link and waits for them, leaving their upstream
// queues in place; calling it without Start, or twice, does nothing.
func (s *Supervisor) Stop() { s.loop.Stop() }

// Poke makes the supervisor look at the policies now rather than at its
// next poll (after a policy change).
func (s *Supervisor) Poke() { s.loop.Poke() }

func (s *Supervisor) tell() {
	s.mu.Lock()
	s.dirty = true
	s.mu.Unlock()
	s.Poke()
}

// Status lists the links of vhost ("" for all), sorted by vhost, kind,
// name and upstream.
func (s *Supervisor) Status(vhost string) []LinkStatus {
	s.mu.Lock()
	out := make([]LinkStatus, 0, len(s.links))
	for k, r := range s.links {
		if vhost != "" && k.VHost != vhost {
			continue
		}
		st := LinkStatus{LinkKey: k, ID: linkID(k), Status: r.l.status(), UpstreamName: r.l.up.Exchange}
		if r.away.Load() {
			var ok bool
			if st.Status, st.Node, ok = s.reported(k); !ok {
				continue
			}
		}
		if k.Queue {
			st.UpstreamName, st.ConsumerTag = r.l.up.Queue, r.l.up.ConsumerTag
		}
		out = append(out, st)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].LinkKey, out[j].LinkKey
		if a.VHost != b.VHost {
			return a.VHost < b.VHost
		}
		if a.Queue != b.Queue {
			return !a.Queue
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Upstream < b.Upstream
	})
	return out
}

// Restart asks for the link of vhost whose id (LinkStatus.ID) is id to
// be stopped and started again, keeping its upstream queue, as
// rabbit_federation_link_sup:restart does; false when no such link is
// listed. Placed through a linkloop.Restarter, the broker running the
// link restarts it wherever this one is, and Restart returns once it
// has; else the link here restarts on the supervisor's goroutine, soon
// after Restart returns.
func (s *Supervisor) Restart(ctx context.Context, vhost, id string) (bool, error) {
	var key LinkKey
	found := false
	s.mu.Lock()
	for k, r := range s.links {
		if k.VHost == vhost && linkID(k) == id {
			if r.away.Load() {
				_, _, ok := s.reported(k)
				found = ok
			} else {
				found = true
			}
			key = k
		}
	}
	s.mu.Unlock()
	if !found {
		return false, nil // as GET /api/federation-links would not list it
	}
	if placed, running, err := linkloop.Restart(ctx, s.cfg.Placer, placementName(key)); placed {
		return running, err
	}
	s.mu.Lock()
	_, found = s.links[key]
	if found {
		s.restart[key] = true
	}
	s.mu.Unlock()
	if found {
		s.Poke()
	}
	return found, nil
}

// linkID is a link's id in the API: RabbitMQ hashes its key too
// (rabbit_federation_status:unique_id), with Erlang's phash2.
func linkID(k LinkKey) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s\x00%v\x00%s\x00%s", k.VHost, k.Queue, k.Name, k.Upstream)
	return fmt.Sprintf("%08x", h.Sum32())
}

// run is the goroutine that owns the links.
func (s *Supervisor) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer func() {
		s.mu.Lock()
		for _, r := range s.links {
			r.cancel()
		}
		s.mu.Unlock()
		wg.Wait()
	}()
	tick := time.NewTicker(4 * s.cfg.Poll)
	defer tick.Stop()
	var lookup map[string]*vhostParams
	for {
		s.mu.Lock()
		dirty := s.dirty
		s.dirty = false
		s.mu.Unlock()
		if dirty {
			l, err := s.readParams(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.cfg.Log.Warn("federation: reading upstreams", "err", err)
				s.mu.Lock()
				s.dirty = true // again at the next poll
				s.mu.Unlock()
			} else {
				lookup = l
			}
		}
		s.reconcile(ctx, &wg, lookup)
		select {
		case <-ctx.Done():
			return
		case <-s.loop.Wake():
		case <-tick.C:
		}
	}
}

// vhostParams is one vhost's stored upstreams and sets, parsed.
type vhostParams struct {
	upstreams map[string]Settings
	sets      map[string][]SetElement
	names     []string
}

func (s *Supervisor) readParams(ctx context.Context) (map[string]*vhostParams, error) {
	out := map[string]*vhostParams{}
	get := func(vh string) *vhostParams {
		p := out[vh]
		if p == nil {
			p = &vhostParams{upstreams: map[string]Settings{}, sets: map[string][]SetElement{}}
			out[vh] = p
		}
		return p
	}
	ups, err := s.cfg.Params.ListParameters(ctx, ComponentUpstream, "")
	if err != nil {
		return nil, err
	}
	for _, p := range ups {
		v, err := decodeValue(p.Value)
		if err == nil {
			var st Settings
			if st, err = ParseUpstream(p.Name, v); err == nil {
				vp := get(p.VHost)
				vp.upstreams[p.Name] = st
				vp.names = append(vp.names, p.Name)
				continue
			}
		}
		s.cfg.Log.Warn("federation: stored upstream refused", "vhost", p.VHost, "name", p.Name, "err", err)
	}
	sets, err := s.cfg.Params.ListParameters(ctx, ComponentUpstreamSet, "")
	if err != nil {
		return nil, err
	}
	for _, p := range sets {
		v, err := decodeValue(p.Value)
		if err == nil {
			var els []SetElement
			if els, err = ParseUpstreamSet(p.Name, v); err == nil {
				get(p.VHost).sets[p.Name] = els
				continue
			}
		}
		s.cfg.Log.Warn("federation: stored upstream set refused", "vhost", p.VHost, "name", p.Name, "err", err)
	}
	for _, p := range out {
		sort.Strings(p.names)
	}
	return out, nil
}

func decodeValue(v []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	err := d.Decode(&x)
	return x, err
}

// reconcile starts, restarts and stops links to match what the policies
// and upstreams ask for now.
func (s *Supervisor) reconcile(ctx context.Context, wg *sync.WaitGroup, params map[string]*vhostParams) {
	type want struct {
		t    Target
		up   Upstream
		spec string
	}
	wanted := map[LinkKey]want{}
	vhosts := make([]string, 0, len(params))
	for vh := range params {
		vhosts = append(vhosts, vh)
	}
	sort.Strings(vhosts)
	var targets []Target
	if len(vhosts) > 0 { // no upstream anywhere: nothing to look at
		targets = s.cfg.Host.Targets(vhosts)
	}
	for _, t := range targets {
		vp := params[t.VHost]
		if vp == nil {
			continue
		}
		l := Lookup{
			Upstream: func(n string) (Settings, bool) { st, ok := vp.upstreams[n]; return st, ok },
			Set:      func(n string) ([]SetElement, bool) { e, ok := vp.sets[n]; return e, ok },
			All:      func() []string { return vp.names },
		}
		for _, up := range Upstreams(l, t.Keys, t.Name) {
			if len(up.URIs) == 0 {
				continue
			}
			k := LinkKey{VHost: t.VHost, Queue: t.Queue, Name: t.Name, Upstream: up.Name}
			spec, _ := json.Marshal(struct {
				T Target
				U Upstream
			}{t, up})
			wanted[k] = want{t: t, up: up, spec: string(spec)}
		}
	}
	s.mu.Lock()
	cur := make(map[LinkKey]*running, len(s.links))
	for k, r := range s.links {
		cur[k] = r
	}
	restart := s.restart
	s.restart = map[LinkKey]bool{}
	s.mu.Unlock()
	for k, r := range cur {
		w, ok := wanted[k]
		if ok && w.spec == r.spec && !restart[k] {
			continue
		}
		// A link no longer wanted cleans up upstream; one restarted for
		// new settings keeps its upstream queue (the same name) and what
		// waits in it.
		s.stopLink(k, r, !ok)
	}
	for k, w := range wanted {
		if r, ok := cur[k]; ok && r.spec == w.spec && !restart[k] {
			continue
		}
		s.startLink(ctx, wg, k, w.t, w.up, w.spec)
	}
}

func (s *Supervisor) startLink(ctx context.Context, wg *sync.WaitGroup, k LinkKey, t Target, up Upstream, spec string) {
	lctx, cancel := context.WithCancel(ctx)
	r := &running{l: newLink(k, t, up, s.env), spec: spec, cancel: cancel, exited: make(chan struct{})}
	r.away.Store(s.cfg.Placer != nil)
	s.mu.Lock()
	s.links[k] = r
	s.mu.Unlock()
	s.cfg.Log.Info("federation: link starting", "vhost", k.VHost, "queue", k.Queue, "name", k.Name, "upstream", k.Upstream)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(r.exited)
		here := func(yes bool) {
			if yes {
				r.l.update(func(st *Status) { st.State, st.Error = Starting, "" })
			}
			r.away.Store(!yes)
		}
		report := func() []byte {
			st := r.l.status()
			if r.away.Load() { // acquiring it: the link starts again
				st.State, st.Error = Starting, ""
			}
			b, _ := json.Marshal(st)
			return b
		}
		err := linkloop.Placed(lctx, s.cfg.Placer, placementName(k), here, report, func(hctx context.Context) error {
			r.l.run(hctx)
			return hctx.Err()
		})
		if err != nil && lctx.Err() == nil {
			s.cfg.Log.Warn("federation: placing a link", "vhost", k.VHost, "name", k.Name, "upstream", k.Upstream, "err", err)
		}
	}()
}

// placementName is a link's lease name: one per local object and
// upstream.
func placementName(k LinkKey) string {
	kind := "exchange"
	if k.Queue {
		kind = "queue"
	}
	return "federation/" + k.VHost + "/" + kind + "/" + k.Name + "/" + k.Upstream
}

// reported is the status of k as the broker running it last stored it,
// and that broker; false when none is known.
func (s *Supervisor) reported(k LinkKey) (Status, string, bool) {
	return linkloop.Reported[Status](s.cfg.Placer, placementName(k))
}

// stopLink stops a link and waits for it; cleanup deletes its upstream
// queue and internal exchange (unless resource-cleanup-mode is never).
func (s *Supervisor) stopLink(k LinkKey, r *running, cleanup bool) {
	r.l.cleanup.Store(cleanup)
	r.cancel()
	<-r.exited
	s.mu.Lock()
	if s.links[k] == r {
		delete(s.links, k)
	}
	s.mu.Unlock()
}
