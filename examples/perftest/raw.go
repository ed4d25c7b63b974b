package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
)

// The raw client (-client raw) measures the broker without a client
// library's cost: its publisher writes pre-encoded basic.publish frames,
// rawBatch messages per Write, patching only each body's sequence number and
// send time; its consumer consumes with no-ack and reads frame headers off
// the socket, looking only at basic.deliver and the first 12 bytes of each
// body. The amqp091-go admin connection still declares and deletes the
// topology. It runs the transient and fanout scenarios.
const rawBatch = 256

// rawConn is one handshaken connection with channel 1 open.
type rawConn struct {
	nc       net.Conn
	br       *bufio.Reader
	frameMax uint32
}

// rawDial dials and handshakes a raw client connection to the broker the
// run measures: -url, or the in-process listener.
func rawDial(tgt *target, name string) (*rawConn, error) {
	if tgt.rawURL == "" {
		return nil, errors.New("perftest: -client raw needs a TCP broker: -url, or -inprocess=tcp")
	}
	u, err := amqp091.ParseURI(tgt.rawURL)
	if err != nil {
		return nil, fmt.Errorf("perftest: raw client: %w", err)
	}
	if u.Scheme != "amqp" {
		return nil, fmt.Errorf("perftest: raw client speaks plain amqp://, not %s://", u.Scheme)
	}
	nc, err := net.DialTimeout("tcp", net.JoinHostPort(u.Host, fmt.Sprint(u.Port)), 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("perftest: raw client: %w", err)
	}
	c := &rawConn{nc: nc, br: bufio.NewReaderSize(nc, 256<<10)}
	if err := c.handshake(u, name); err != nil {
		nc.Close()
		return nil, fmt.Errorf("perftest: raw client %s: %w", name, err)
	}
	return c, nil
}

func (c *rawConn) handshake(u amqp091.URI, name string) error {
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.nc.SetDeadline(time.Time{})
	if _, err := c.nc.Write([]byte("AMQP\x00\x00\x09\x01")); err != nil {
		return err
	}
	if _, err := expectMethod[*amqp.ConnectionStart](c); err != nil {
		return err
	}
	err := c.send(0, &amqp.ConnectionStartOk{
		ClientProperties: amqp.Table{"connection_name": name, "product": "perftest raw client"},
		Mechanism:        "PLAIN",
		Response:         "\x00" + u.Username + "\x00" + u.Password,
		Locale:           "en_US",
	})
	if err != nil {
		return err
	}
	tune, err := expectMethod[*amqp.ConnectionTune](c)
	if err != nil {
		return err
	}
	c.frameMax = tune.FrameMax
	if c.frameMax == 0 {
		c.frameMax = 128 << 10
	}
	// Heartbeat 0: the raw client never sends one, and asks for none.
	if err := c.send(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: c.frameMax}); err != nil {
		return err
	}
	if err := c.send(0, &amqp.ConnectionOpen{VirtualHost: u.Vhost}); err != nil {
		return err
	}
	if _, err := expectMethod[*amqp.ConnectionOpenOk](c); err != nil {
		return err
	}
	if err := c.send(1, &amqp.ChannelOpen{}); err != nil {
		return err
	}
	_, err = expectMethod[*amqp.ChannelOpenOk](c)
	return err
}

func (c *rawConn) send(ch uint16, m amqp.Method) error {
	_, err := c.nc.Write(amqp.AppendMethodFrame(nil, ch, m))
	return err
}

// readMethod reads the next method frame, skipping heartbeats, and turns a
// close from the broker into an error.
func (c *rawConn) readMethod() (amqp.Method, error) {
	for {
		typ, payload, err := c.readFrame()
		if err != nil {
			return nil, err
		}
		if typ != amqp.FrameMethod {
			continue
		}
		m, err := amqp.DecodeMethod(payload)
		if err != nil {
			return nil, err
		}
		if err := closeError(m); err != nil {
			return nil, err
		}
		return m, nil
	}
}

func expectMethod[M amqp.Method](c *rawConn) (M, error) {
	var zero M
	m, err := c.readMethod()
	if err != nil {
		return zero, err
	}
	got, ok := m.(M)
	if !ok {
		return zero, fmt.Errorf("got %T, want %T", m, zero)
	}
	return got, nil
}

// readFrame reads one whole frame (handshake and replies only: the consumer
// loop reads deliveries without copying them).
func (c *rawConn) readFrame() (uint8, []byte, error) {
	var hdr [7]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return 0, nil, err
	}
	size := binary.BigEndian.Uint32(hdr[3:])
	if size > 16<<20 {
		return 0, nil, fmt.Errorf("frame of %d bytes", size)
	}
	buf := make([]byte, size+1)
	if _, err := io.ReadFull(c.br, buf); err != nil {
		return 0, nil, err
	}
	if buf[size] != amqp.FrameEnd {
		return 0, nil, fmt.Errorf("frame end %#x", buf[size])
	}
	return hdr[0], buf[:size], nil
}

func closeError(m amqp.Method) error {
	switch m := m.(type) {
	case *amqp.ConnectionClose:
		return fmt.Errorf("connection closed by the broker: %d %s", m.ReplyCode, m.ReplyText)
	case *amqp.ChannelClose:
		return fmt.Errorf("channel closed by the broker: %d %s", m.ReplyCode, m.ReplyText)
	}
	return nil
}

// rawFlow is a flow's raw publisher connection.
type rawFlow struct {
	c      *rawConn
	frames []byte // rawBatch pre-encoded publishes
	seqAt  []int  // where each publish's body starts in frames
}

// encodePublishes pre-encodes rawBatch publishes of a size-byte body to
// exchange/key, each body in frames of at most frameMax bytes.
func encodePublishes(exchange, key string, size int, frameMax uint32) ([]byte, []int) {
	body := make([]byte, size)
	props := (&amqp.Properties{DeliveryMode: 1}).Append(nil)
	var frames []byte
	seqAt := make([]int, rawBatch)
	for i := range rawBatch {
		frames = (&amqp.BasicPublish{Exchange: exchange, RoutingKey: key}).AppendFrame(frames, 1)
		frames = amqp.AppendHeaderFrame(frames, 1, amqp.ClassBasic, uint64(size), props)
		seqAt[i] = len(frames) + 7 // past the first body frame's header
		frames = amqp.AppendBodyFrames(frames, 1, body, frameMax)
	}
	return frames, seqAt
}

// rawState is runStreams' state for the raw client.
type rawState struct {
	*runState
	pubs  []*rawFlow
	subs  []*rawConn
	errMu sync.Mutex
	errs  []string
	done  atomic.Bool // set before the sockets are closed on purpose
}

func (r *rawState) fail(who string, err error) {
	if r.done.Load() {
		return
	}
	r.errMu.Lock()
	r.errs = append(r.errs, fmt.Sprintf("perftest: raw %s: %v", who, err))
	r.errMu.Unlock()
}

// runRaw is runStreams for -client raw.
func runRaw(ctx context.Context, cfg *config, tgt *target) (*result, error) {
	sp, err := specFor(cfg)
	if err != nil {
		return nil, err
	}
	if sp.confirmWindow > 0 || !sp.autoAck || sp.rate > 0 || sp.sharedConn {
		return nil, fmt.Errorf("perftest: -client raw runs the transient and fanout scenarios, not %s", cfg.scenario)
	}
	r := &rawState{runState: &runState{cfg: cfg, tgt: tgt, spec: sp, base: time.Now(), id: runID()}}
	defer r.closeRaw()
	if err := r.setupRaw(); err != nil {
		return nil, err
	}

	res := newResult(cfg, tgt)
	res.Client = "raw"
	res.Connections = len(r.pubs) + len(r.subs)
	res.Queues = sp.flows * sp.queuesPerFlow
	meter := startMeter(tgt)
	defer meter.stop()

	t0 := r.now()
	deadline := time.Now().Add(cfg.duration)
	pubCtx, stopPub := context.WithDeadline(ctx, deadline)
	defer stopPub()
	var pubs sync.WaitGroup
	for i, f := range r.flows {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			r.publishRaw(pubCtx, f, r.pubs[i], deadline)
		}()
	}
	wake := time.AfterFunc(time.Until(deadline), func() {
		for _, f := range r.flows {
			f.inflight.close()
		}
	})
	defer wake.Stop()
	pubs.Wait()
	pubEnd := r.now()

	drainErr := r.drain(ctx)
	cpu := meter.cpu()
	time.Sleep(cfg.dupGrace)
	mem := meter.stop()
	r.done.Store(true)
	r.closeSockets()
	r.wg.Wait()

	var hist histogram
	var lastAt int64
	for _, f := range r.flows {
		res.Published += f.published.Load()
		for _, s := range f.streams {
			hist.merge(&s.hist)
			res.Consumed += s.received.Load()
			res.Duplicates += s.track.dups
			res.Reordered += s.track.reordered
			res.Malformed += s.track.malformed
			res.Lost += s.track.missing(f.published.Load())
			lastAt = max(lastAt, s.lastAt.Load())
		}
	}
	r.errMu.Lock()
	res.Errors = append(res.Errors, r.errs...)
	r.errMu.Unlock()
	if drainErr != nil {
		res.Errors = append(res.Errors, drainErr.Error())
	}
	res.setRates(pubEnd-t0, 0, lastAt-t0)
	res.setLatency(&hist)
	res.setResources(cpu, mem, lastAt-t0)
	res.verify(false)
	return res, nil
}

// setupRaw declares the topology over amqp091-go and opens the raw
// connections: one publisher per flow, one consumer per queue.
func (r *rawState) setupRaw() error {
	adminConn, err := r.dial("perftest-admin")
	if err != nil {
		return err
	}
	if r.admin, _, err = openChannel(adminConn, "admin"); err != nil {
		return err
	}
	for i := range r.spec.flows {
		f := &flow{id: i}
		r.flows = append(r.flows, f)
		qs := make([]string, r.spec.queuesPerFlow)
		for j := range qs {
			qs[j] = fmt.Sprintf("perftest-%s-%s-%d-%d", r.cfg.scenario, r.id, i, j)
			if _, err := r.admin.QueueDeclare(qs[j], false, false, false, false, nil); err != nil {
				return fmt.Errorf("perftest: declare %s: %w", qs[j], err)
			}
			f.streams = append(f.streams, &stream{queue: qs[j], flow: f})
		}
		if r.spec.fanout {
			f.exchange = fmt.Sprintf("perftest-%s-%s-%d", r.cfg.scenario, r.id, i)
			if err := r.admin.ExchangeDeclare(f.exchange, "fanout", false, false, false, false, nil); err != nil {
				return fmt.Errorf("perftest: declare exchange %s: %w", f.exchange, err)
			}
			for _, q := range qs {
				if err := r.admin.QueueBind(q, "", f.exchange, false, nil); err != nil {
					return fmt.Errorf("perftest: bind %s: %w", q, err)
				}
			}
		} else {
			f.key = qs[0]
		}
		f.inflight = newWindow(r.cfg.inflight * len(qs))

		pc, err := rawDial(r.tgt, fmt.Sprintf("perftest-raw-publisher-%d", i))
		if err != nil {
			return err
		}
		p := &rawFlow{c: pc}
		p.frames, p.seqAt = encodePublishes(f.exchange, f.key, r.cfg.size, pc.frameMax)
		r.pubs = append(r.pubs, p)
		r.wg.Add(1)
		go r.watchPublisher(p)
		for j, s := range f.streams {
			sc, err := rawDial(r.tgt, fmt.Sprintf("perftest-raw-consumer-%d-%d", i, j))
			if err != nil {
				return err
			}
			r.subs = append(r.subs, sc)
			if err := sc.send(1, &amqp.BasicConsume{Queue: s.queue, ConsumerTag: "raw", NoAck: true}); err != nil {
				return fmt.Errorf("perftest: raw consume %s: %w", s.queue, err)
			}
			if _, err := expectMethod[*amqp.BasicConsumeOk](sc); err != nil {
				return fmt.Errorf("perftest: raw consume %s: %w", s.queue, err)
			}
			r.wg.Add(1)
			go r.consumeRaw(s, sc)
		}
	}
	return nil
}

// watchPublisher reads the publisher's connection, where only a close (or a
// connection.blocked, ignored) can arrive, so a refused publish is reported.
func (r *rawState) watchPublisher(p *rawFlow) {
	defer r.wg.Done()
	for {
		if _, err := p.c.readMethod(); err != nil {
			r.fail("publisher", err)
			return
		}
	}
}

// publishRaw writes rawBatch publishes per Write until the deadline, never
// more than the inflight window ahead of the consumers.
func (r *rawState) publishRaw(ctx context.Context, f *flow, p *rawFlow, deadline time.Time) {
	n := len(f.streams)
	for seq := uint32(0); ; seq += rawBatch {
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return
		}
		if !f.inflight.acquire(n * rawBatch) {
			return
		}
		now := r.now()
		for i, at := range p.seqAt {
			putHeader(p.frames[at:], seq+uint32(i), now)
		}
		f.started.Store(uint64(seq) + rawBatch)
		if _, err := p.c.nc.Write(p.frames); err != nil {
			r.fail("publisher", err)
			return
		}
		f.published.Add(rawBatch)
	}
}

// consumeRaw counts deliveries off the socket: the 7-byte frame header of
// every frame, the method ids of method frames, and the sequence number and
// send time at the start of the first body frame after each basic.deliver.
// It releases the inflight window once per read of the socket rather than
// per message.
func (r *rawState) consumeRaw(s *stream, c *rawConn) {
	defer r.wg.Done()
	var hdr [7]byte
	awaitBody := false
	released := 0
	for {
		if c.br.Buffered() == 0 && released > 0 {
			s.flow.inflight.release(released)
			released = 0
		}
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			r.fail("consumer", err)
			return
		}
		size := int(binary.BigEndian.Uint32(hdr[3:]))
		switch hdr[0] {
		case amqp.FrameMethod:
			p, err := c.br.Peek(min(size+1, c.br.Size()))
			if err != nil || size < 4 || len(p) < size+1 || p[size] != amqp.FrameEnd {
				r.fail("consumer", fmt.Errorf("bad method frame of %d bytes (%v)", size, err))
				return
			}
			if binary.BigEndian.Uint16(p) == amqp.ClassBasic && binary.BigEndian.Uint16(p[2:]) == amqp.MethodBasicDeliver {
				awaitBody = true
			} else if m, err := amqp.DecodeMethod(p[:size]); err != nil || closeError(m) != nil {
				r.fail("consumer", errors.Join(err, closeError(m)))
				return
			}
		case amqp.FrameBody:
			if awaitBody {
				awaitBody = false
				p, err := c.br.Peek(min(size, headerSize))
				if err != nil {
					r.fail("consumer", err)
					return
				}
				now := r.now()
				if seq, sent, ok := parseHeader(p); ok {
					s.hist.record(now - sent)
					s.track.see(seq, s.flow.started.Load())
				} else {
					s.track.malformed++
				}
				s.received.Add(1)
				s.distinct.Store(s.track.distinct)
				s.lastAt.Store(now)
				released++
			}
		}
		if _, err := c.br.Discard(size + 1); err != nil {
			r.fail("consumer", err)
			return
		}
	}
}

// closeSockets closes the raw connections, ending their goroutines.
func (r *rawState) closeSockets() {
	for _, p := range r.pubs {
		p.c.nc.Close()
	}
	for _, c := range r.subs {
		c.nc.Close()
	}
	for _, f := range r.flows {
		f.inflight.close()
	}
}

// closeRaw undoes setupRaw on every path out of runRaw.
func (r *rawState) closeRaw() {
	r.done.Store(true)
	r.closeSockets()
	r.close()
}
