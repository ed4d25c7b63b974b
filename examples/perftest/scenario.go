package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// spec is the shape of a streaming scenario: flows, each one publisher
// feeding queuesPerFlow queues with one consumer each.
type spec struct {
	flows         int
	queuesPerFlow int
	fanout        bool // publish to a fanout exchange bound to the flow's queues
	durable       bool // durable queues, persistent (delivery mode 2) messages
	confirmWindow int  // 0: no publisher confirms
	autoAck       bool
	prefetch      int
	rate          int  // messages/s per publisher; 0: as fast as the window allows
	sharedConn    bool // publisher and consumer of a flow share one connection
}

var scenarios = []string{"transient", "persistent-confirm", "latency", "fanout", "get", "many-queues", "scale"}

func specFor(cfg *config) (spec, error) {
	s := spec{flows: 1, queuesPerFlow: 1, autoAck: true}
	switch cfg.scenario {
	case "transient":
	case "persistent-confirm":
		s.durable = true
		s.flows = orDefault(cfg.queues, 1)
		s.confirmWindow = cfg.confirmWindow
		s.autoAck = false
		s.prefetch = cfg.prefetch
	case "latency":
		s.rate = orDefault(cfg.rate, 1000)
	case "fanout":
		s.fanout = true
		s.queuesPerFlow = orDefault(cfg.queues, 8)
	case "many-queues":
		s.flows = orDefault(cfg.connections, 50)
		s.rate = orDefault(cfg.rate, 100)
		s.sharedConn = true
	default:
		return s, fmt.Errorf("perftest: unknown scenario %q (have %v)", cfg.scenario, scenarios)
	}
	if cfg.rate > 0 {
		s.rate = cfg.rate
	}
	return s, nil
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// stream is one queue and the consumer reading it.
type stream struct {
	queue  string
	flow   *flow
	ch     channel
	closed chan *amqp091.Error
	hist   histogram
	track  tracker

	// Written by the consumer goroutine, read by the drain loop.
	distinct atomic.Uint64
	received atomic.Uint64
	lastAt   atomic.Int64 // nanoseconds since the run's base
	ackErr   atomic.Pointer[error]
}

// flow is one publisher and its queues.
type flow struct {
	id       int
	exchange string
	key      string
	ch       channel
	closed   chan *amqp091.Error
	confirms chan amqp091.Confirmation
	streams  []*stream
	inflight *window // published, not yet consumed (per delivery)
	unconf   *window // published, not yet confirmed

	started   atomic.Uint64 // sequence numbers handed out; bounds what consumers accept
	published atomic.Uint64
	confirmed atomic.Uint64
	nacked    atomic.Uint64
	lastConf  atomic.Int64
	pubErr    error // set by the publisher goroutine before it exits
	// acked holds the sequence numbers the broker confirmed (delivery tag
	// less one: one publisher per channel), owned by listenConfirms; read
	// once it has stopped.
	acked tracker
	// confirmsEnded is set when the confirm listener stopped: the
	// publisher's channel closed, so what it had not seen confirmed never
	// will be, and its outcome is unknown.
	confirmsEnded atomic.Bool
}

// runState holds what a streaming scenario opened so it can close all of it.
type runState struct {
	cfg   *config
	tgt   *target
	spec  spec
	base  time.Time
	id    string
	conns []conn
	flows []*flow
	admin channel
	wg    sync.WaitGroup
}

func (r *runState) now() int64 { return int64(time.Since(r.base)) }

func (r *runState) dial(name string) (conn, error) {
	return r.dialAt(name, 0)
}

// dialAt dials for queue slot: with several -url the slot's own broker.
func (r *runState) dialAt(name string, slot int) (conn, error) {
	dial := r.tgt.dial
	if r.tgt.dialAt != nil {
		dial = func(name string) (conn, error) { return r.tgt.dialAt(name, slot) }
	}
	c, err := dial(name)
	if err != nil {
		return nil, fmt.Errorf("perftest: connect %s: %w", name, err)
	}
	r.conns = append(r.conns, c)
	return c, nil
}

func openChannel(c conn, what string) (channel, chan *amqp091.Error, error) {
	ch, err := c.Channel()
	if err != nil {
		return nil, nil, fmt.Errorf("perftest: %s channel: %w", what, err)
	}
	return ch, ch.NotifyClose(make(chan *amqp091.Error, 1)), nil
}

func runID() string {
	return fmt.Sprintf("%d-%x", os.Getpid(), time.Now().UnixNano()&0xffffffff)
}

// setup declares the topology and opens every connection and consumer
// before the clock starts.
func (r *runState) setup() error {
	adminConn, err := r.dial("perftest-admin")
	if err != nil {
		return err
	}
	if r.admin, _, err = openChannel(adminConn, "admin"); err != nil {
		return err
	}
	for i := range r.spec.flows {
		f := &flow{id: i}
		// Flow i's connections all go to -url number i mod their count,
		// and it declares its queues there: a cluster member given a
		// queue's declaration leads it (RabbitMQ's client-local locator),
		// so the queues' leaders spread as their clients do.
		pubConn, err := r.dialAt(fmt.Sprintf("perftest-publisher-%d", i), i)
		if err != nil {
			return err
		}
		if f.ch, f.closed, err = openChannel(pubConn, "publisher"); err != nil {
			return err
		}
		qs := make([]string, r.spec.queuesPerFlow)
		for j := range qs {
			qs[j] = fmt.Sprintf("perftest-%s-%s-%d-%d", r.cfg.scenario, r.id, i, j)
			// Not auto-delete: RabbitMQ would delete the queue the moment a
			// consumer hiccups. cleanup deletes them.
			var args amqp091.Table
			if r.cfg.queueType != "" {
				args = amqp091.Table{"x-queue-type": r.cfg.queueType}
			}
			if _, err := f.ch.QueueDeclare(qs[j], r.spec.durable, false, false, false, args); err != nil {
				return fmt.Errorf("perftest: declare %s: %w", qs[j], err)
			}
		}
		if r.spec.fanout {
			f.exchange = fmt.Sprintf("perftest-%s-%s-%d", r.cfg.scenario, r.id, i)
			if err := f.ch.ExchangeDeclare(f.exchange, "fanout", r.spec.durable, false, false, false, nil); err != nil {
				return fmt.Errorf("perftest: declare exchange %s: %w", f.exchange, err)
			}
			for _, q := range qs {
				if err := f.ch.QueueBind(q, "", f.exchange, false, nil); err != nil {
					return fmt.Errorf("perftest: bind %s: %w", q, err)
				}
			}
		} else {
			f.key = qs[0]
		}
		f.inflight = newWindow(r.cfg.inflight * len(qs))

		if r.spec.confirmWindow > 0 {
			if err := f.ch.Confirm(false); err != nil {
				return fmt.Errorf("perftest: confirm.select: %w", err)
			}
			// One more than the window: the client library blocks its
			// reader on a full listener.
			f.confirms = f.ch.NotifyPublish(make(chan amqp091.Confirmation, r.spec.confirmWindow+1))
			f.unconf = newWindow(r.spec.confirmWindow)
		}
		for j, q := range qs {
			c := pubConn
			if !r.spec.sharedConn {
				if c, err = r.dialAt(fmt.Sprintf("perftest-consumer-%d-%d", i, j), i); err != nil {
					return err
				}
			}
			s := &stream{queue: q, flow: f}
			if s.ch, s.closed, err = openChannel(c, "consumer"); err != nil {
				return err
			}
			if !r.spec.autoAck && r.spec.prefetch > 0 {
				if err := s.ch.Qos(r.spec.prefetch, 0, false); err != nil {
					return fmt.Errorf("perftest: qos: %w", err)
				}
			}
			f.streams = append(f.streams, s)
		}
		r.flows = append(r.flows, f)
	}
	return nil
}

// consume runs on its own goroutine until the consumer's channel closes.
func (r *runState) consume(s *stream, deliveries <-chan amqp091.Delivery) {
	defer r.wg.Done()
	for d := range deliveries {
		now := r.now()
		if seq, sent, ok := parseHeader(d.Body); ok {
			s.hist.record(now - sent)
			s.track.see(seq, s.flow.started.Load())
		} else {
			s.track.malformed++
		}
		if !r.spec.autoAck {
			if err := d.Ack(false); err != nil && s.ackErr.Load() == nil {
				s.ackErr.Store(&err)
			}
		}
		s.received.Add(1)
		s.distinct.Store(s.track.distinct)
		s.lastAt.Store(now)
		s.flow.inflight.release(1)
	}
}

func (r *runState) listenConfirms(f *flow) {
	defer r.wg.Done()
	defer f.confirmsEnded.Store(true)
	for c := range f.confirms {
		if c.Ack {
			if c.DeliveryTag > 0 && c.DeliveryTag <= 1<<32 {
				f.acked.see(uint32(c.DeliveryTag-1), f.started.Load())
			}
			f.confirmed.Add(1)
		} else {
			f.nacked.Add(1)
		}
		f.lastConf.Store(r.now())
		f.unconf.release(1)
	}
}

// publish sends until the deadline; it paces itself when the scenario has a
// rate, and never has more outstanding than the windows allow.
func (r *runState) publish(ctx context.Context, f *flow, start time.Time, deadline time.Time) {
	defer r.wg.Done()
	body := make([]byte, r.cfg.size)
	msg := amqp091.Publishing{Body: body, DeliveryMode: amqp091.Transient}
	if r.spec.durable {
		msg.DeliveryMode = amqp091.Persistent
	}
	var interval time.Duration
	if r.spec.rate > 0 {
		interval = time.Second / time.Duration(r.spec.rate)
		// Spread the flows' sends over one interval instead of firing
		// them all on the same tick.
		start = start.Add(interval * time.Duration(f.id) / time.Duration(r.spec.flows))
	}
	n := len(f.streams)
	for seq := uint32(0); ; seq++ {
		if interval > 0 {
			next := start.Add(interval * time.Duration(seq))
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return
		}
		if !f.inflight.acquire(n) {
			return
		}
		if f.unconf != nil && !f.unconf.acquire(1) {
			return
		}
		f.started.Store(uint64(seq) + 1)
		putHeader(body, seq, r.now())
		// The client writes the frames before Publish returns, so the
		// body buffer can be reused.
		if err := f.ch.PublishWithContext(ctx, f.exchange, f.key, false, false, msg); err != nil {
			if ctx.Err() == nil {
				f.pubErr = fmt.Errorf("perftest: publish: %w", err)
			}
			return
		}
		f.published.Add(1)
	}
}

// runStreams runs every scenario but get.
func runStreams(ctx context.Context, cfg *config, tgt *target) (*result, error) {
	sp, err := specFor(cfg)
	if err != nil {
		return nil, err
	}
	r := &runState{cfg: cfg, tgt: tgt, spec: sp, base: time.Now(), id: runID()}
	defer r.close()
	if err := r.setup(); err != nil {
		return nil, err
	}
	for _, f := range r.flows {
		for _, s := range f.streams {
			deliveries, err := s.ch.Consume(s.queue, "", sp.autoAck, false, false, false, nil)
			if err != nil {
				return nil, fmt.Errorf("perftest: consume %s: %w", s.queue, err)
			}
			r.wg.Add(1)
			go r.consume(s, deliveries)
		}
		if f.confirms != nil {
			r.wg.Add(1)
			go r.listenConfirms(f)
		}
	}

	res := newResult(cfg, tgt)
	res.Connections = len(r.conns) - 1
	res.Queues = sp.flows * sp.queuesPerFlow
	res.Rate = sp.rate
	if sp.confirmWindow > 0 {
		res.ConfirmWindow = sp.confirmWindow
	}
	if !sp.autoAck {
		res.Prefetch = sp.prefetch
	}
	meter := startMeter(tgt)
	defer meter.stop()

	t0 := r.now()
	start := time.Now()
	deadline := start.Add(cfg.duration)
	pubCtx, stopPub := context.WithDeadline(ctx, deadline)
	defer stopPub()
	var pubs sync.WaitGroup
	for _, f := range r.flows {
		r.wg.Add(1)
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			r.publish(pubCtx, f, start, deadline)
		}()
	}
	// A publisher blocked on a full window must not outlive the deadline.
	wake := time.AfterFunc(time.Until(deadline), func() {
		for _, f := range r.flows {
			f.inflight.close()
			if f.unconf != nil {
				f.unconf.close()
			}
		}
	})
	defer wake.Stop()
	pubs.Wait()
	pubEnd := r.now()

	drainErr := r.drain(ctx)
	cpu := meter.cpu()
	// Anything arriving now is a duplicate (or a stray): give it a moment.
	time.Sleep(cfg.dupGrace)
	mem := meter.stop()
	// Read the broker's channel closes before closing the connections
	// ourselves, which may report an EOF of our own making.
	for _, f := range r.flows {
		for _, s := range f.streams {
			res.Errors = appendClosed(res.Errors, "consumer", s.closed)
		}
		res.Errors = appendClosed(res.Errors, "publisher", f.closed)
	}
	r.closeConns()
	r.wg.Wait()

	var hist histogram
	var lastAt, lastConf int64
	for _, f := range r.flows {
		res.Published += f.published.Load()
		res.Confirmed += f.confirmed.Load()
		res.Nacked += f.nacked.Load()
		lastConf = max(lastConf, f.lastConf.Load())
		if f.pubErr != nil {
			res.Errors = append(res.Errors, f.pubErr.Error())
		}
		for _, s := range f.streams {
			hist.merge(&s.hist)
			res.Consumed += s.received.Load()
			res.Duplicates += s.track.dups
			res.Reordered += s.track.reordered
			res.Malformed += s.track.malformed
			res.Lost += s.track.missing(f.published.Load())
			res.LostConfirmed += s.track.notSeenOf(&f.acked)
			lastAt = max(lastAt, s.lastAt.Load())
			if p := s.ackErr.Load(); p != nil {
				res.Errors = append(res.Errors, "perftest: ack: "+(*p).Error())
			}
		}
	}
	if drainErr != nil {
		res.Errors = append(res.Errors, drainErr.Error())
	}
	res.setRates(pubEnd-t0, lastConf-t0, lastAt-t0)
	res.setLatency(&hist)
	res.setResources(cpu, mem, lastAt-t0)
	res.verify(sp.confirmWindow > 0)
	return res, nil
}

// drain waits until every queue has delivered everything its publisher
// published and every confirm has arrived.
func (r *runState) drain(ctx context.Context) error {
	return r.waitFor(ctx, "deliveries and confirms", func() (uint64, bool) {
		var progress uint64
		done := true
		for _, f := range r.flows {
			pub := f.published.Load()
			if f.confirms != nil {
				c := f.confirmed.Load() + f.nacked.Load()
				progress += c
				if c < pub && f.confirmsEnded.Load() {
					// The broker closed the publisher's channel (541:
					// outcome unknown): what it did not confirm may
					// never arrive, so wait only for what it confirmed.
					pub = f.confirmed.Load()
				}
				done = done && c >= pub
			}
			for _, s := range f.streams {
				progress += s.received.Load()
				done = done && s.distinct.Load() >= pub
			}
		}
		return progress, done
	})
}

// waitFor polls check every millisecond until it reports done, or until its
// progress count has not moved for cfg.drainTimeout: that bound, not a
// total, is what keeps a stalled broker from hanging the run while a slow
// one still finishes.
func (r *runState) waitFor(ctx context.Context, what string, check func() (progress uint64, done bool)) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var last uint64
	lastMove := time.Now()
	for {
		progress, done := check()
		if done {
			return nil
		}
		if progress != last {
			last, lastMove = progress, time.Now()
		} else if time.Since(lastMove) > r.cfg.drainTimeout {
			return fmt.Errorf("perftest: gave up waiting for %s after %v without progress", what, r.cfg.drainTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("perftest: interrupted while waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

func appendClosed(errs []string, who string, ch chan *amqp091.Error) []string {
	select {
	case e, ok := <-ch:
		if ok && e != nil {
			return append(errs, fmt.Sprintf("perftest: %s channel closed by the broker: %v", who, e))
		}
	default:
	}
	return errs
}

func (r *runState) closeConns() {
	// The admin connection (first) stays open for cleanup.
	for _, c := range r.conns[min(1, len(r.conns)):] {
		c.Close()
	}
	for _, f := range r.flows {
		f.inflight.close()
		if f.unconf != nil {
			f.unconf.close()
		}
	}
}

// close deletes what setup declared and closes every connection. It runs
// on every path out of runStreams, including setup failures.
func (r *runState) close() {
	r.closeConns()
	r.wg.Wait()
	if r.admin != nil && !r.cfg.keep {
		for _, f := range r.flows {
			for _, s := range f.streams {
				r.admin.QueueDelete(s.queue, false, false, false)
			}
			if f.exchange != "" {
				r.admin.ExchangeDelete(f.exchange, false, false)
			}
		}
	}
	if len(r.conns) > 0 {
		r.conns[0].Close()
	}
	r.conns = nil
}

// runGet fills a queue with cfg.count messages (confirmed, outside the
// measured window), then drains it with basic.get and a single ack per
// message until the queue answers get-empty.
func runGet(ctx context.Context, cfg *config, tgt *target) (*result, error) {
	r := &runState{cfg: cfg, tgt: tgt, base: time.Now(), id: runID(), spec: spec{autoAck: false}}
	defer r.close()
	adminConn, err := r.dial("perftest-admin")
	if err != nil {
		return nil, err
	}
	if r.admin, _, err = openChannel(adminConn, "admin"); err != nil {
		return nil, err
	}
	f := &flow{key: fmt.Sprintf("perftest-get-%s", r.id), inflight: newWindow(1)}
	s := &stream{queue: f.key, flow: f}
	f.streams = []*stream{s}
	r.flows = []*flow{f}
	if _, err := r.admin.QueueDeclare(s.queue, false, false, false, false, nil); err != nil {
		return nil, fmt.Errorf("perftest: declare %s: %w", s.queue, err)
	}
	if err := r.fill(ctx, f, cfg.count); err != nil {
		return nil, err
	}

	c, err := r.dial("perftest-getter")
	if err != nil {
		return nil, err
	}
	if s.ch, s.closed, err = openChannel(c, "getter"); err != nil {
		return nil, err
	}
	res := newResult(cfg, tgt)
	res.Connections = 1
	res.Queues = 1
	meter := startMeter(tgt)
	defer meter.stop()
	t0 := r.now()
	var getErr error
	for ctx.Err() == nil {
		before := r.now()
		d, ok, err := s.ch.Get(s.queue, false)
		if err != nil {
			getErr = fmt.Errorf("perftest: basic.get: %w", err)
			break
		}
		if !ok {
			break
		}
		now := r.now()
		// For get the latency is the basic.get round trip: the messages
		// waited in the queue on purpose.
		s.hist.record(now - before)
		if seq, _, ok := parseHeader(d.Body); ok {
			s.track.see(seq, f.started.Load())
		} else {
			s.track.malformed++
		}
		if err := d.Ack(false); err != nil {
			getErr = fmt.Errorf("perftest: ack: %w", err)
			break
		}
		s.received.Add(1)
		s.lastAt.Store(now)
	}
	cpu := meter.cpu()
	mem := meter.stop()
	end := s.lastAt.Load()

	res.Published = f.published.Load()
	res.Confirmed = f.confirmed.Load()
	res.Consumed = s.received.Load()
	res.Duplicates = s.track.dups
	res.Reordered = s.track.reordered
	res.Malformed = s.track.malformed
	res.Lost = s.track.missing(f.published.Load())
	if getErr != nil {
		res.Errors = append(res.Errors, getErr.Error())
	}
	if ctx.Err() != nil {
		res.Errors = append(res.Errors, "perftest: interrupted")
	}
	res.Errors = appendClosed(res.Errors, "getter", s.closed)
	// Publishing is not part of the measurement; only gets are rated.
	res.setRates(0, 0, end-t0)
	res.setLatency(&s.hist)
	res.setResources(cpu, mem, end-t0)
	res.verify(true)
	return res, nil
}

// fill publishes n messages with confirms and waits for all of them.
func (r *runState) fill(ctx context.Context, f *flow, n int) error {
	c, err := r.dial("perftest-filler")
	if err != nil {
		return err
	}
	if f.ch, f.closed, err = openChannel(c, "filler"); err != nil {
		return err
	}
	if err := f.ch.Confirm(false); err != nil {
		return fmt.Errorf("perftest: confirm.select: %w", err)
	}
	const window = 256
	f.confirms = f.ch.NotifyPublish(make(chan amqp091.Confirmation, window+1))
	f.unconf = newWindow(window)
	r.wg.Add(1)
	go r.listenConfirms(f)
	body := make([]byte, r.cfg.size)
	msg := amqp091.Publishing{Body: body}
	for seq := range uint32(n) {
		if !f.unconf.acquire(1) {
			return errors.New("perftest: fill: confirm window closed")
		}
		f.started.Store(uint64(seq) + 1)
		putHeader(body, seq, r.now())
		if err := f.ch.PublishWithContext(ctx, "", f.key, false, false, msg); err != nil {
			return fmt.Errorf("perftest: fill: %w", err)
		}
		f.published.Add(1)
	}
	err = r.waitFor(ctx, "confirms of the fill", func() (uint64, bool) {
		c := f.confirmed.Load() + f.nacked.Load()
		return c, c >= f.published.Load()
	})
	if err != nil {
		return err
	}
	if nacked := f.nacked.Load(); nacked > 0 {
		return fmt.Errorf("perftest: fill: broker nacked %d of %d messages", nacked, n)
	}
	return nil
}
