package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The scale scenario measures how cost grows with the work a broker holds
// rather than its speed on one flow: one deep queue (fill, restart, drain),
// many durable queues (declare and bind, one message each, delete) and
// many idle connections. Each phase is one result (scenario scale-PHASE),
// so -json prints one line per phase.

// scalePhases lists the phases in the order they run.
var scalePhases = []string{"fill", "restart", "drain", "queues", "connections"}

// scaleQueue is the deep queue's name: fill and drain may run in two
// processes with a broker restart between them (compare.sh).
const scaleQueue = "perftest-scale-deep"

// scaleExchange routes the queues phase's publishes; durable, so the
// bindings are what a restart would recover.
const scaleExchange = "perftest-scale"

// drainWindows is how many equal slices the drain is cut into, to see
// whether its rate stays flat from the first message to the last.
const drainWindows = 10

// scaleWindow is one slice of the drain.
type scaleWindow struct {
	Messages uint64   `json:"messages"`
	PerS     float64  `json:"per_s"`
	DiskMiB  *float64 `json:"disk_mib,omitempty"`
	RSSMiB   *float64 `json:"rss_mib,omitempty"`
}

func parsePhases(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(scalePhases, p) {
			return nil, fmt.Errorf("perftest: -phases: unknown phase %q (have %v)", p, scalePhases)
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("perftest: -phases: %q twice", p)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("perftest: -phases: no phase")
	}
	return out, nil
}

// scaleRun holds what the phases share.
type scaleRun struct {
	cfg    *config
	tgt    *target
	phases []string
	admin  channel
	conn   conn
	// restartedAt is when the broker serving the drain was started: the
	// in-process restart, or the broker process's start time.
	restartedAt time.Time
}

// runScale runs the phases -phases selects and returns one result each.
// It stops at the first phase that fails to run (a phase that runs but
// loses messages is reported, unverified, and the next ones still run).
func runScale(ctx context.Context, cfg *config, tgt *target) ([]*result, error) {
	phases, err := parsePhases(cfg.phases)
	if err != nil {
		return nil, err
	}
	s := &scaleRun{cfg: cfg, tgt: tgt, phases: phases}
	defer s.closeAdmin()
	var out []*result
	for _, p := range phases {
		var res []*result
		var err error
		switch p {
		case "fill":
			res, err = s.fill(ctx)
		case "restart":
			err = s.restart()
		case "drain":
			res, err = s.drain(ctx)
		case "queues":
			res, err = s.queues(ctx)
		case "connections":
			res, err = s.connections(ctx)
		}
		out = append(out, res...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func (s *scaleRun) newResult(phase, title string, items int) *result {
	r := newResult(s.cfg, s.tgt)
	r.Scenario = "scale-" + phase
	r.Title = title
	r.Items = items
	return r
}

func (s *scaleRun) openAdmin() error {
	if s.admin != nil {
		return nil
	}
	c, err := s.tgt.dial("perftest-scale-admin")
	if err != nil {
		return fmt.Errorf("perftest: connect: %w", err)
	}
	ch, err := c.Channel()
	if err != nil {
		c.Close()
		return fmt.Errorf("perftest: admin channel: %w", err)
	}
	s.conn, s.admin = c, ch
	return nil
}

func (s *scaleRun) closeAdmin() {
	if s.conn != nil {
		s.conn.Close()
	}
	s.conn, s.admin = nil, nil
}

// rss is the broker's resident set now, after a pause that lets the
// broker settle (a garbage collection, RabbitMQ's memory monitor); ok is
// false when it cannot be read.
func (s *scaleRun) rss(settle bool) (uint64, bool) {
	if s.tgt.memPID < 0 {
		return 0, false
	}
	if settle {
		time.Sleep(s.cfg.settle)
	}
	rss, _, err := memStatus(s.tgt.memPID)
	return rss, err == nil
}

// perItem sets r.PerItemKiB to the growth of RSS from before to after,
// divided among n items.
func perItem(r *result, before, after uint64, okBefore, okAfter bool, n int) {
	if !okBefore || !okAfter || n == 0 {
		return
	}
	r.RSSEndMiB = ptr(float64(after) / mib)
	r.PerItemKiB = ptr((float64(after) - float64(before)) / 1024 / float64(n))
}

// fill publishes cfg.count persistent messages of cfg.size bytes, with
// confirms, to a fresh durable queue and waits for every confirm.
func (s *scaleRun) fill(ctx context.Context) ([]*result, error) {
	if err := s.openAdmin(); err != nil {
		return nil, err
	}
	if _, err := s.admin.QueueDelete(scaleQueue, false, false, false); err != nil {
		return nil, fmt.Errorf("perftest: delete %s: %w", scaleQueue, err)
	}
	if _, err := s.admin.QueueDeclare(scaleQueue, true, false, false, false, nil); err != nil {
		return nil, fmt.Errorf("perftest: declare %s: %w", scaleQueue, err)
	}
	r := &runState{cfg: s.cfg, tgt: s.tgt, base: time.Now(), id: runID()}
	defer func() {
		for _, c := range r.conns {
			c.Close()
		}
	}()
	c, err := r.dial("perftest-scale-publisher")
	if err != nil {
		return nil, err
	}
	f := &flow{key: scaleQueue, inflight: newWindow(1)}
	if f.ch, f.closed, err = openChannel(c, "publisher"); err != nil {
		return nil, err
	}
	if err := f.ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("perftest: confirm.select: %w", err)
	}
	window := s.cfg.confirmWindow
	f.confirms = f.ch.NotifyPublish(make(chan amqp091.Confirmation, window+1))
	f.unconf = newWindow(window)
	r.wg.Add(1)
	go r.listenConfirms(f)

	title := fmt.Sprintf("fill one queue with %s msgs", thousands(s.cfg.count))
	res := s.newResult("fill", title, s.cfg.count)
	res.Connections, res.Queues, res.ConfirmWindow = 1, 1, window
	before, okBefore := s.rss(true)
	meter := startMeter(s.tgt)
	defer meter.stop()
	t0 := r.now()
	body := make([]byte, s.cfg.size)
	msg := amqp091.Publishing{Body: body, DeliveryMode: amqp091.Persistent}
	// Random padding, new for every message, so a broker that compresses
	// (Pebble does) stores what a real 1 KiB payload would cost it.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var pubErr error
	for seq := range uint32(s.cfg.count) {
		if !f.unconf.acquire(1) {
			break
		}
		f.started.Store(uint64(seq) + 1)
		for i := headerSize; i+8 <= len(body); i += 8 {
			binary.LittleEndian.PutUint64(body[i:], rng.Uint64())
		}
		putHeader(body, seq, r.now())
		if err := f.ch.PublishWithContext(ctx, "", f.key, false, false, msg); err != nil {
			pubErr = fmt.Errorf("perftest: publish: %w", err)
			break
		}
		f.published.Add(1)
	}
	pubEnd := r.now()
	werr := r.waitFor(ctx, "confirms of the fill", func() (uint64, bool) {
		c := f.confirmed.Load() + f.nacked.Load()
		return c, c >= f.published.Load()
	})
	cpu := meter.cpu()
	mem := meter.stop()
	res.Errors = appendClosed(res.Errors, "publisher", f.closed)
	// No admin connection among r.conns: close them all, which ends the
	// confirm listener.
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.wg.Wait()
	res.Published, res.Confirmed, res.Nacked = f.published.Load(), f.confirmed.Load(), f.nacked.Load()
	for _, err := range []error{pubErr, werr} {
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
		}
	}
	if res.Published != uint64(s.cfg.count) {
		res.Errors = append(res.Errors, fmt.Sprintf("perftest: published %d of %d", res.Published, s.cfg.count))
	}
	res.setRates(pubEnd-t0, f.lastConf.Load()-t0, 0)
	res.setResources(cpu, mem, f.lastConf.Load()-t0)
	after, okAfter := s.rss(true)
	perItem(res, before, after, okBefore, okAfter, s.cfg.count)
	res.verify(true)
	return []*result{res}, nil
}

// restart restarts an in-process broker, keeping its data. Against -url
// the broker is restarted by whoever runs perftest (compare.sh), and the
// drain measures readiness from the broker process's start time.
func (s *scaleRun) restart() error {
	if s.tgt.restart == nil {
		return errors.New("perftest: -phases restart needs an in-process broker with a data directory; against -url, restart the broker between -phases fill and -phases drain")
	}
	s.closeAdmin()
	at, err := s.tgt.restart()
	if err != nil {
		return fmt.Errorf("perftest: restart: %w", err)
	}
	s.restartedAt = at
	return nil
}

// brokerStart returns when the broker now serving was started: the
// in-process restart, or the broker process's start time from /proc.
func (s *scaleRun) brokerStart() (time.Time, bool) {
	if !s.restartedAt.IsZero() {
		return s.restartedAt, true
	}
	if s.cfg.brokerPID > 0 {
		if t, err := procStartTime(s.cfg.brokerPID); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// drain connects (retrying while the broker starts), consumes the deep
// queue with -prefetch and an ack per message until cfg.count messages
// arrived, and reports the time from the broker's start to the first
// delivery (scale-ready), the drain rate overall and in windows, and the
// data directory's size as it drains (-du).
func (s *scaleRun) drain(ctx context.Context) ([]*result, error) {
	start, startOK := s.brokerStart()
	n := s.cfg.count
	var c conn
	var err error
	for deadline := time.Now().Add(s.cfg.drainTimeout); ; {
		if c, err = s.tgt.dial("perftest-scale-consumer"); err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("perftest: connect for the drain: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer c.Close()
	ch, closed, err := openChannel(c, "consumer")
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(s.cfg.prefetch, 0, false); err != nil {
		return nil, fmt.Errorf("perftest: qos: %w", err)
	}
	ready := s.newResult("ready", fmt.Sprintf("restart, then ready with %s queued", thousands(n)), n)
	res := s.newResult("drain", fmt.Sprintf("drain them (prefetch %d)", s.cfg.prefetch), n)
	res.Connections, res.Queues, res.Prefetch = 1, 1, s.cfg.prefetch
	ready.Connections, ready.Queues = 1, 1

	before, okBefore := s.rss(false)
	meter := startMeter(s.tgt)
	defer meter.stop()
	deliveries, err := ch.Consume(scaleQueue, "", false, false, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("perftest: consume %s: %w", scaleQueue, err)
	}
	base := time.Now()
	var track tracker
	var first, last time.Time
	var consumed uint64
	var ackErr error
	windows := make([]scaleWindow, 0, drainWindows)
	per := max(uint64(n)/drainWindows, 1)
	winStart := base
	diskStart, diskOK := s.du()
	timeout := time.NewTimer(s.cfg.drainTimeout)
	defer timeout.Stop()
loop:
	for consumed < uint64(n) {
		select {
		case d, ok := <-deliveries:
			if !ok {
				break loop
			}
			now := time.Now()
			if first.IsZero() {
				first, winStart = now, now
			}
			last = now
			if seq, _, ok := parseHeader(d.Body); ok {
				track.see(seq, uint64(n))
			} else {
				track.malformed++
			}
			if err := d.Ack(false); err != nil && ackErr == nil {
				ackErr = err
			}
			consumed++
			if consumed%per == 0 && len(windows) < drainWindows {
				w := scaleWindow{Messages: per, PerS: perSecond(per, int64(now.Sub(winStart)))}
				if v, ok := s.du(); ok {
					w.DiskMiB = ptr(float64(v) / mib)
				}
				if v, ok := s.rss(false); ok {
					w.RSSMiB = ptr(float64(v) / mib)
				}
				windows = append(windows, w)
				winStart = time.Now()
			}
			if !timeout.Stop() {
				<-timeout.C
			}
			timeout.Reset(s.cfg.drainTimeout)
		case <-timeout.C:
			res.Errors = append(res.Errors, fmt.Sprintf("perftest: drain: no delivery for %v", s.cfg.drainTimeout))
			break loop
		case <-ctx.Done():
			res.Errors = append(res.Errors, "perftest: interrupted")
			break loop
		}
	}
	// Anything arriving now is a duplicate: give it a moment.
	grace := time.After(s.cfg.dupGrace)
dup:
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				break dup
			}
			if seq, _, ok := parseHeader(d.Body); ok {
				track.see(seq, uint64(n))
			}
			d.Ack(false)
		case <-grace:
			break dup
		}
	}
	cpu := meter.cpu()
	mem := meter.stop()
	res.Errors = appendClosed(res.Errors, "consumer", closed)
	if ackErr != nil {
		res.Errors = append(res.Errors, "perftest: ack: "+ackErr.Error())
	}
	res.Published = uint64(n)
	res.Consumed = consumed
	res.Duplicates, res.Reordered, res.Malformed = track.dups, track.reordered, track.malformed
	res.Lost = track.missing(uint64(n))
	res.Windows = windows
	if diskOK {
		res.DiskStartMiB = ptr(float64(diskStart) / mib)
	}
	// Deleting the queue is not part of the drain; the data directory's
	// size is taken before it, with the queue empty.
	if v, ok := s.du(); ok {
		res.DiskEndMiB = ptr(float64(v) / mib)
	}
	if !first.IsZero() {
		res.setRates(0, 0, int64(last.Sub(first)))
		res.setResources(cpu, mem, int64(last.Sub(first)))
		if startOK {
			ready.ReadyS = ptr(first.Sub(start).Seconds())
		}
	}
	after, okAfter := s.rss(true)
	perItem(res, before, after, okBefore, okAfter, n)
	res.PerItemKiB = nil // the drain frees, it does not hold
	res.verify(false)
	ready.Verified = len(res.Errors) == 0 && consumed > 0
	if ready.ReadyS == nil {
		ready.Errors = append(ready.Errors, "perftest: ready time unknown: restart in process (-phases restart) or give -broker-pid")
		ready.Verified = false
	}
	if _, err := ch.QueueDelete(scaleQueue, false, false, false); err != nil {
		res.Errors = append(res.Errors, fmt.Sprintf("perftest: delete %s: %v", scaleQueue, err))
	}
	return []*result{ready, res}, nil
}

// du is the space the data directory (-du) takes on disk, as du counts
// it: allocated blocks, so preallocated WAL files count what they hold.
func (s *scaleRun) du() (uint64, bool) {
	dir := s.cfg.du
	if dir == "" {
		dir = s.tgt.dataDir
	}
	if dir == "" {
		return 0, false
	}
	var total uint64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed by a compaction while walking
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += uint64(st.Blocks) * 512
		} else {
			total += uint64(info.Size())
		}
		return nil
	})
	return total, err == nil
}

// queues declares cfg.queues durable queues, each bound to a durable
// direct exchange by its name; publishes one persistent message to each
// through the exchange, with confirms; and deletes them. Each step is one
// result: its rate, and memory per queue (idle, then holding a message).
func (s *scaleRun) queues(ctx context.Context) ([]*result, error) {
	if err := s.openAdmin(); err != nil {
		return nil, err
	}
	q := s.cfg.queues
	name := func(i int) string { return fmt.Sprintf("perftest-scale-q-%d", i) }
	if err := s.admin.ExchangeDeclare(scaleExchange, "direct", true, false, false, false, nil); err != nil {
		return nil, fmt.Errorf("perftest: declare exchange %s: %w", scaleExchange, err)
	}
	declare := s.newResult("declare", fmt.Sprintf("declare + bind %s durable queues", thousands(q)), q)
	publish := s.newResult("publish", fmt.Sprintf("publish 1 msg to each of the %s queues", thousands(q)), q)
	del := s.newResult("delete", fmt.Sprintf("delete the %s queues", thousands(q)), q)
	for _, r := range []*result{declare, publish, del} {
		r.Connections, r.Queues = 1, q
	}
	before, okBefore := s.rss(true)

	meter := startMeter(s.tgt)
	t0 := time.Now()
	var err error
	declared := 0
	for i := 0; i < q && err == nil; i++ {
		if _, err = s.admin.QueueDeclare(name(i), true, false, false, false, nil); err == nil {
			declared++
			err = s.admin.QueueBind(name(i), name(i), scaleExchange, false, nil)
		}
	}
	declare.OpsPerS = perSecond(uint64(declared), int64(time.Since(t0)))
	s.finishStep(declare, meter, err)
	after, okAfter := s.rss(true)
	perItem(declare, before, after, okBefore, okAfter, declared)

	if err == nil {
		err = s.publishEach(ctx, publish, declared, name)
		after, okAfter = s.rss(true)
		perItem(publish, before, after, okBefore, okAfter, declared)
	} else {
		publish.Errors = append(publish.Errors, "perftest: not run: the declares failed")
	}

	if err := s.openAdmin(); err != nil {
		return []*result{declare, publish, del}, err
	}
	meter = startMeter(s.tgt)
	t0 = time.Now()
	var derr error
	deleted := 0
	for i := range declared {
		if _, derr = s.admin.QueueDelete(name(i), false, false, false); derr != nil {
			break
		}
		deleted++
	}
	del.OpsPerS = perSecond(uint64(deleted), int64(time.Since(t0)))
	s.finishStep(del, meter, derr)
	if derr == nil {
		derr = s.admin.ExchangeDelete(scaleExchange, false, false)
	}
	return []*result{declare, publish, del}, derr
}

// finishStep records a step's resources and outcome.
func (s *scaleRun) finishStep(r *result, m *meter, err error) {
	cpu := m.cpu()
	mem := m.stop()
	r.setResources(cpu, mem, 0)
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
		s.closeAdmin() // the channel is closed by the error
	}
	r.Verified = len(r.Errors) == 0
}

// publishEach publishes one persistent message to each of the first n
// queues through the exchange, with confirms, and checks each queue holds
// it (queue.declare passive's message count).
func (s *scaleRun) publishEach(ctx context.Context, res *result, n int, name func(int) string) error {
	c, err := s.tgt.dial("perftest-scale-publisher")
	if err != nil {
		return fmt.Errorf("perftest: connect: %w", err)
	}
	defer c.Close()
	ch, closed, err := openChannel(c, "publisher")
	if err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("perftest: confirm.select: %w", err)
	}
	window := s.cfg.confirmWindow
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, window+1))
	body := make([]byte, s.cfg.size)
	msg := amqp091.Publishing{Body: body, DeliveryMode: amqp091.Persistent}
	meter := startMeter(s.tgt)
	t0 := time.Now()
	var acked, nacked, outstanding int
	wait := func(keep int) {
		for outstanding > keep {
			conf, ok := <-confirms
			if !ok {
				outstanding = 0
				return
			}
			outstanding--
			if conf.Ack {
				acked++
			} else {
				nacked++
			}
		}
	}
	for i := range n {
		wait(window - 1)
		putHeader(body, uint32(i), int64(time.Since(t0)))
		if err = ch.PublishWithContext(ctx, scaleExchange, name(i), true, false, msg); err != nil {
			break
		}
		res.Published++
		outstanding++
	}
	wait(0)
	res.OpsPerS = perSecond(uint64(acked), int64(time.Since(t0)))
	res.Confirmed, res.Nacked = uint64(acked), uint64(nacked)
	res.Errors = appendClosed(res.Errors, "publisher", closed)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Sprintf("perftest: publish: %v", err))
	}
	s.finishStep(res, meter, nil)
	res.verify(true)
	if err != nil {
		return err
	}
	// Spot-check that the messages were routed: every queue holds one.
	for _, i := range []int{0, n / 2, n - 1} {
		qs, err := s.admin.QueueDeclare(name(i), true, false, false, false, nil)
		if err != nil {
			return fmt.Errorf("perftest: check %s: %w", name(i), err)
		}
		if qs.Messages != 1 {
			res.Errors = append(res.Errors, fmt.Sprintf("perftest: %s holds %d messages, want 1", name(i), qs.Messages))
			res.Verified = false
		}
	}
	return nil
}

// connections opens cfg.connections connections with a channel each,
// measures the broker's RSS with all of them open and idle, and closes
// them.
func (s *scaleRun) connections(ctx context.Context) ([]*result, error) {
	n := s.cfg.connections
	res := s.newResult("connections", fmt.Sprintf("%s idle connections with a channel", thousands(n)), n)
	before, okBefore := s.rss(true)
	meter := startMeter(s.tgt)
	conns := make([]conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	t0 := time.Now()
	var err error
	for i := 0; i < n && ctx.Err() == nil; i++ {
		var c conn
		if c, err = s.tgt.dial(fmt.Sprintf("perftest-scale-idle-%d", i)); err != nil {
			err = fmt.Errorf("perftest: connection %d: %w", i+1, err)
			break
		}
		conns = append(conns, c)
		if _, err = c.Channel(); err != nil {
			err = fmt.Errorf("perftest: channel on connection %d: %w", i+1, err)
			break
		}
	}
	res.OpsPerS = perSecond(uint64(len(conns)), int64(time.Since(t0)))
	res.Connections = len(conns)
	s.finishStep(res, meter, err)
	after, okAfter := s.rss(true)
	perItem(res, before, after, okBefore, okAfter, len(conns))
	return []*result{res}, nil
}

// procStartTime returns when process pid started, to the clock tick: its
// age is the system's uptime (/proc/uptime) less its start time in ticks
// since boot (field 22 of /proc/PID/stat).
func procStartTime(pid int) (time.Time, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, fmt.Errorf("perftest: broker start time: %w", err)
	}
	up, err := os.ReadFile("/proc/uptime")
	now := time.Now()
	if err != nil {
		return time.Time{}, fmt.Errorf("perftest: uptime: %w", err)
	}
	return parseStartTime(raw, up, now)
}

func parseStartTime(stat, uptime []byte, now time.Time) (time.Time, error) {
	end := strings.LastIndexByte(string(stat), ')')
	if end < 0 {
		return time.Time{}, errors.New("perftest: /proc stat: no command name")
	}
	// fields[0] is field 3; starttime is field 22.
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 20 {
		return time.Time{}, errors.New("perftest: /proc stat: too few fields for the start time")
	}
	ticks, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("perftest: /proc stat: starttime: %w", err)
	}
	secs, _, _ := strings.Cut(strings.TrimSpace(string(uptime)), " ")
	upS, err := strconv.ParseFloat(secs, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("perftest: /proc/uptime: %w", err)
	}
	age := time.Duration(upS*float64(time.Second)) - time.Duration(ticks)*time.Second/clockTicks
	return now.Add(-age), nil
}

// thousands formats n with thousands separators.
func thousands(n int) string {
	if n < 1000 {
		return strconv.Itoa(n)
	}
	return cell(float64(n), true)
}

// writeScaleText prints one scale phase.
func (r *result) writeScaleText(w io.Writer) {
	fmt.Fprintf(w, "%s: %s, against %s\n", r.Scenario, r.Title, r.Target)
	if r.ConfirmedPerS > 0 {
		fmt.Fprintf(w, "  confirmed  %10d  %12.0f msg/s\n", r.Confirmed, r.ConfirmedPerS)
	}
	if r.ConsumedPerS > 0 {
		fmt.Fprintf(w, "  consumed   %10d  %12.0f msg/s\n", r.Consumed, r.ConsumedPerS)
	}
	if r.OpsPerS > 0 {
		fmt.Fprintf(w, "  rate       %10d  %12.0f /s\n", r.Items, r.OpsPerS)
	}
	if r.ReadyS != nil {
		fmt.Fprintf(w, "  ready      %.2f s after the broker started\n", *r.ReadyS)
	}
	if r.RSSPeakMiB != nil {
		fmt.Fprintf(w, "  RSS        %.1f MiB at start, %.1f MiB peak\n", *r.RSSStartMiB, *r.RSSPeakMiB)
	}
	if r.PerItemKiB != nil {
		fmt.Fprintf(w, "  memory     %.2f KiB per item (%.1f MiB after, settled)\n", *r.PerItemKiB, *r.RSSEndMiB)
	}
	if r.DiskStartMiB != nil && r.DiskEndMiB != nil {
		fmt.Fprintf(w, "  disk       %.1f MiB before the drain, %.1f MiB after\n", *r.DiskStartMiB, *r.DiskEndMiB)
	}
	for i, win := range r.Windows {
		fmt.Fprintf(w, "  window %2d  %12.0f msg/s", i+1, win.PerS)
		if win.DiskMiB != nil {
			fmt.Fprintf(w, "  disk %8.1f MiB", *win.DiskMiB)
		}
		if win.RSSMiB != nil {
			fmt.Fprintf(w, "  RSS %7.1f MiB", *win.RSSMiB)
		}
		fmt.Fprintln(w)
	}
	if r.Verified {
		fmt.Fprintln(w, "  verified   yes")
	} else {
		fmt.Fprintf(w, "  verified   NO: %s\n", r.problems())
	}
}
