package session

import (
	"errors"
	"net"
	"os"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/vhost"
)

// FuzzSession drives a Conn with a real vhost by random frame sequences and
// checks that it never panics, never hangs, leaves no goroutine behind, and
// only ever closes a channel with a soft reply code and the connection with
// a hard one (or 200/320).
//
// The input is a small program (see fuzzProgram): a mode byte, then
// opcodes that emit valid methods with fuzzed fields, content headers and
// bodies, raw frames with arbitrary types, channels and payloads, and raw
// garbage. Decoding is total: every byte string is a valid program, so the
// fuzzer spends its time on the session and not on the format.
//
// The mode byte's bits: 1 runs the handshake; 2 lifts the message size
// limit, so headers may announce anything up to (and beyond) 512 MiB with
// partial bodies after them; 4 raises the memory alarm over and over while
// the program runs, clearing it each time it holds the reader (and the
// handshake announces connection.blocked). Whatever the program, the bytes
// the connection counted as buffered (partial bodies, uncommitted
// transactions) must all be given back once it ended.
//
// Run it with: go test -run '^$' -fuzz FuzzSession ./internal/session
func FuzzSession(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runFuzzSession(t, data)
	})
}

// fuzzSeeds are programs exercising each part of the session; testdata/fuzz
// holds what the fuzzer found interesting. The helpers below spell the
// program format: on(ch) is a channel byte (2 is channel 1, 3 channel 2).
func fuzzSeeds() [][]byte {
	const ch1, ch2 = 2, 3
	method := func(ch, idx byte, fields ...byte) []byte { return append([]byte{0, ch, idx}, fields...) }
	header := func(ch, size byte) []byte { return []byte{3, 0, 0, 0, 0, ch, size} }
	body := func(ch byte, b string) []byte { return append([]byte{4, ch, byte(len(b))}, b...) }
	mode := func(m byte, parts ...[]byte) []byte {
		out := []byte{m}
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	prog := func(handshake bool, parts ...[]byte) []byte {
		if handshake {
			return mode(1, parts...)
		}
		return mode(0, parts...)
	}
	return [][]byte{
		{},
		prog(true),
		// declare q, publish "hey" to it, get, ack, get-empty
		prog(true, method(ch1, 0), method(ch1, 8, 1, 0, 0, 0, 0, 0, 0),
			method(ch1, 17, 0, 1, 0, 0), header(ch1, 3), body(ch1, "hey"),
			method(ch1, 20, 1, 0), method(ch1, 21, 1, 0), method(ch1, 20, 1, 0)),
		// confirm mode, consume with prefetch 1, publish two, nack-requeue, tx on a confirm channel (406)
		prog(true, method(ch1, 0), method(ch1, 8, 1, 0, 0, 0, 0, 0, 0), method(ch1, 24, 0),
			method(ch1, 13, 0, 1, 0), method(ch1, 14, 1, 0, 0, 0, 0, 0, 0),
			method(ch1, 17, 0, 1, 0, 0), header(ch1, 1), body(ch1, "a"),
			method(ch1, 17, 0, 1, 0, 0), header(ch1, 1), body(ch1, "b"),
			method(ch1, 23, 1, 1, 1), method(ch1, 25)),
		// exchanges: declare x fanout, bind q to it, e2e bind, publish, unbind, delete
		prog(true, method(ch1, 0), method(ch1, 4, 3, 1, 0, 0, 0, 0, 0, 0), method(ch1, 8, 1, 0, 0, 0, 0, 0, 0),
			method(ch1, 9, 1, 3, 0, 0, 0), method(ch1, 6, 4, 3, 0, 0, 0),
			method(ch1, 17, 3, 0, 1, 0), header(ch1, 0),
			method(ch1, 10, 1, 3, 0, 0), method(ch1, 5, 3, 0, 0)),
		// 403s: configure "d", read/write outside q*/x*
		prog(true, method(ch1, 0), method(ch1, 8, 9, 0, 0, 0, 0, 0, 0), method(ch2, 0), method(ch2, 20, 5, 0)),
		// a body larger than MaxMessageSize, a header without a method, a body without a header
		prog(true, method(ch1, 0), method(ch1, 17, 0, 1, 0, 0), header(ch1, 200), header(ch2, 1), body(ch2, "x")),
		// garbage frame type, then a torn frame
		prog(true, []byte{6, 9, 1, 3, 1, 2, 3}, []byte{7, 5, 'A', 'M', 'Q', 'P', 0}),
		// no handshake: channel methods before start-ok
		prog(false, method(ch1, 0), method(ch1, 8, 1)),
		// server-named exclusive queue, consume, channel.flow, recover, channel.close
		prog(true, method(ch1, 0), method(ch1, 8, 0, 0, 0, 1, 0, 0, 0), method(ch1, 15, 0, 0, 0, 0, 0, 0, 0),
			method(ch1, 3, 0), method(ch1, 28, 1), method(ch1, 1)),
		// no size limit: headers announcing 128 MiB and 512 MiB + 1 with a
		// few body bytes each, then the connection ends mid-content
		mode(3, method(ch1, 0), method(ch1, 17, 0, 1, 0, 0), header(ch1, 0xfa), body(ch1, "part"),
			method(ch2, 0), method(ch2, 17, 0, 1, 0, 0), header(ch2, 0xfc), body(ch2, "x")),
		// a transaction never committed: select, declare, publish two, a
		// third whose body stops short, then the end
		mode(3, method(ch1, 0), method(ch1, 8, 1, 0, 0, 0, 0, 0, 0), method(ch1, 25),
			method(ch1, 17, 0, 1, 0, 0), header(ch1, 3), body(ch1, "one"),
			method(ch1, 17, 0, 1, 0, 0), header(ch1, 3), body(ch1, "two"),
			method(ch1, 17, 0, 1, 0, 0), header(ch1, 0xf9), body(ch1, "thr")),
		// a transaction rolled back, then one committed, then one left open
		// on a closed channel
		mode(3, method(ch1, 0), method(ch1, 8, 1, 0, 0, 0, 0, 0, 0), method(ch1, 25),
			method(ch1, 17, 0, 1, 0, 0), header(ch1, 1), body(ch1, "a"), method(ch1, 27),
			method(ch1, 17, 0, 1, 0, 0), header(ch1, 1), body(ch1, "b"), method(ch1, 26),
			method(ch1, 17, 0, 1, 0, 0), header(ch1, 1), body(ch1, "c"), method(ch1, 1)),
		// the memory alarm toggling while a body streams in and a
		// transaction fills
		mode(7, method(ch1, 0), method(ch1, 8, 1, 0, 0, 0, 0, 0, 0), method(ch1, 25),
			method(ch1, 17, 0, 1, 0, 0), header(ch1, 0xf8), body(ch1, "0123456789"), body(ch1, "0123456789"),
			method(ch2, 0), method(ch2, 17, 0, 1, 0, 0), header(ch2, 5), body(ch2, "ab"), body(ch2, "cde")),
	}
}

// fuzzGrant lets the fuzzer meet 403s: configure anything but names
// starting with "d", write and read only names starting with "q", "x" or
// the default exchange.
var fuzzGrant = &Grant{
	Configure: regexp.MustCompile(`(?s)^([^d].*|)$`),
	Write:     regexp.MustCompile(`(?s)^(q.*|x.*|amq\.default)$`),
	Read:      regexp.MustCompile(`(?s)^(q.*|x.*)$`),
}

// Mode bits of a fuzz program's first byte.
const (
	fuzzHandshake = 1 << iota
	fuzzNoSizeLimit
	fuzzAlarm
)

func runFuzzSession(t *testing.T, data []byte) {
	before := runtime.NumGoroutine()
	var mode byte
	if len(data) > 0 {
		mode = data[0]
	}
	vh := testVHost(t)
	cfg := testConfig()
	cfg.VHost = func(name string) (*vhost.VHost, bool) { return vh, name == "/" }
	cfg.Open = func(user, vhost string, _ *Authz) (*Access, func(), error) {
		return NewAccess(user, vhost, fuzzGrant), func() {}, nil
	}
	cfg.CloseTimeout = 100 * time.Millisecond
	cfg.HandshakeTimeout = 5 * time.Second
	cfg.MaxMessageSize = 64
	if mode&fuzzNoSizeLimit != 0 {
		cfg.MaxMessageSize = 0
	}
	alarms := &Alarms{}
	cfg.Alarms = alarms

	server, client := net.Pipe()
	c := NewConn(server, "fuzz#1", cfg)
	served := make(chan error, 1)
	go func() { served <- c.Serve() }()
	toggled := make(chan struct{})
	if mode&fuzzAlarm != 0 {
		go toggleAlarm(c, alarms, served, toggled)
	} else {
		close(toggled)
	}

	// The reader checks every close the server sends.
	bad := make(chan string, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		fr := amqp.NewFrameReader(client)
		fr.SetMaxFrameSize(1 << 20)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if f.Type != amqp.FrameMethod {
				continue
			}
			m, err := amqp.DecodeMethod(f.Payload)
			if err != nil {
				report(bad, "server sent an undecodable method: "+err.Error())
				continue
			}
			if testing.Verbose() {
				t.Logf("server: ch %d %s", f.Channel, m.Name())
			}
			switch m := m.(type) {
			case *amqp.ChannelClose:
				if !softCodes[m.ReplyCode] {
					report(bad, "channel.close with non-soft code "+m.ReplyText)
				}
			case *amqp.ConnectionClose:
				if !hardCodes[m.ReplyCode] {
					report(bad, "connection.close with non-hard code "+m.ReplyText)
				}
				// Answer as a client would, so the server need not wait
				// out its close timeout.
				_, _ = client.Write(amqp.AppendMethodFrame(nil, 0, &amqp.ConnectionCloseOk{}))
			case *amqp.ConnectionCloseOk:
				// Our connection.close was answered: hang up, as clients do.
				client.Close()
			}
		}
	}()

	// The program, then connection.close, then wait for the server to hang
	// up: it answers close-ok (or is already closing) and drops the socket
	// within its close timeout whatever state the program left it in. A
	// write error only means the server hung up early, which is allowed.
	p := fuzzProgram{data: data}
	hang := time.Now().Add(10 * time.Second)
	_ = client.SetWriteDeadline(hang)
	_, err := client.Write(p.bytes())
	if err == nil {
		_, err = client.Write(amqp.AppendMethodFrame(nil, 0, &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess}))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("server stopped reading for 10s\n%s", stacks())
	}
	select {
	case <-readDone:
	case <-time.After(time.Until(hang)):
		t.Fatalf("server kept the connection 10s after connection.close\n%s", stacks())
	}
	client.Close()
	select {
	case err := <-served:
		served <- err // for toggleAlarm
	case <-time.After(10 * time.Second):
		t.Fatalf("Serve did not return after the client hung up\n%s", stacks())
	}
	<-toggled
	select {
	case msg := <-bad:
		t.Fatal(msg)
	default:
	}
	if n := alarms.Buffered(); n != 0 {
		t.Fatalf("%d bytes still counted as buffered after the connection ended", n)
	}
	vh.Close()
	// Queue actors and timers wind down asynchronously after Close.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), stacks())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// toggleAlarm raises the memory alarm, clears it once it holds the
// reader, raises it again once the reader goes on, and so on until Serve
// returned (served gets a value); then it clears the alarm and closes done.
func toggleAlarm(c *Conn, alarms *Alarms, served chan error, done chan struct{}) {
	defer close(done)
	defer alarms.Set(0)
	over := func() bool {
		select {
		case err := <-served:
			served <- err
			return true
		default:
			return false
		}
	}
	for {
		alarms.Set(AlarmMemory)
		for !c.Blocked() {
			if over() {
				return
			}
			time.Sleep(20 * time.Microsecond)
		}
		alarms.Set(0)
		for c.Blocked() {
			if over() {
				return
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
}

func stacks() []byte {
	buf := make([]byte, 1<<20)
	return buf[:runtime.Stack(buf, true)]
}

func report(ch chan string, msg string) {
	select {
	case ch <- msg:
	default:
	}
}

var softCodes = map[uint16]bool{
	amqp.ContentTooLarge: true, amqp.NoRoute: true, amqp.NoConsumers: true, amqp.AccessRefused: true,
	amqp.NotFound: true, amqp.ResourceLocked: true, amqp.PreconditionFailed: true,
}

var hardCodes = map[uint16]bool{
	amqp.ReplySuccess: true, amqp.ConnectionForced: true, amqp.InvalidPath: true, amqp.FrameError: true,
	amqp.SyntaxError: true, amqp.CommandInvalid: true, amqp.ChannelError: true, amqp.UnexpectedFrame: true,
	amqp.ResourceError: true, amqp.NotAllowed: true, amqp.NotImplemented: true, amqp.InternalError: true,
}

// fuzzProgram turns fuzz bytes into AMQP bytes. Reading past the end
// yields zeros, so every input decodes.
type fuzzProgram struct {
	data []byte
	pos  int
	out  []byte
}

func (p *fuzzProgram) more() bool { return p.pos < len(p.data) }

func (p *fuzzProgram) byte() byte {
	if p.pos >= len(p.data) {
		return 0
	}
	b := p.data[p.pos]
	p.pos++
	return b
}

func (p *fuzzProgram) bool() bool { return p.byte()&1 == 1 }

// take returns up to n input bytes.
func (p *fuzzProgram) take(n int) []byte {
	end := min(p.pos+n, len(p.data))
	b := p.data[p.pos:end]
	p.pos = end
	return b
}

var fuzzNames = []string{"", "q", "q2", "x", "xd", "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "d", "amq.gen-x", "qq", "x.t"}

func (p *fuzzProgram) name() string { return fuzzNames[int(p.byte())%len(fuzzNames)] }

// channel is mostly 1 or 2, sometimes 0, sometimes out of range.
func (p *fuzzProgram) channel() uint16 {
	switch b := p.byte(); b % 8 {
	case 0:
		return 0
	case 6:
		return 17 // above the test channel-max
	case 7:
		return uint16(b) << 8
	default:
		return uint16(b%2) + 1
	}
}

// table builds a small field table, including the x-arguments queues and
// exchanges look at, with values of fuzzed types.
func (p *fuzzProgram) table() amqp.Table {
	n := int(p.byte() % 4)
	if n == 0 {
		return nil
	}
	keys := []string{"x-message-ttl", "x-expires", "x-max-length", "x-dead-letter-exchange", "x-queue-type", "alternate-exchange", "x-match", "k", "x-max-priority", "x-overflow", "x-delivery-limit", "x-single-active-consumer"}
	t := amqp.Table{}
	for range n {
		k := keys[int(p.byte())%len(keys)]
		switch p.byte() % 6 {
		case 0:
			t[k] = int32(int8(p.byte())) * 100
		case 1:
			t[k] = p.name()
		case 2:
			t[k] = p.bool()
		case 3:
			t[k] = int64(p.byte())
		case 4:
			t[k] = amqp.Table{"a": int8(p.byte())}
		default:
			t[k] = []any{p.name(), int16(p.byte())}
		}
	}
	return t
}

// method returns a client method with fuzzed fields.
func (p *fuzzProgram) method() amqp.Method {
	switch p.byte() % 32 {
	case 0:
		return &amqp.ChannelOpen{}
	case 1:
		return &amqp.ChannelClose{ReplyCode: amqp.ReplySuccess}
	case 2:
		return &amqp.ChannelCloseOk{}
	case 3:
		return &amqp.ChannelFlow{Active: p.bool()}
	case 4:
		return &amqp.ExchangeDeclare{Exchange: p.name(), Type: []string{"direct", "fanout", "topic", "headers", "bogus", ""}[p.byte()%6],
			Passive: p.bool(), Durable: p.bool(), AutoDelete: p.bool(), Internal: p.bool(), NoWait: p.bool(), Arguments: p.table()}
	case 5:
		return &amqp.ExchangeDelete{Exchange: p.name(), IfUnused: p.bool(), NoWait: p.bool()}
	case 6:
		return &amqp.ExchangeBind{Destination: p.name(), Source: p.name(), RoutingKey: p.name(), NoWait: p.bool(), Arguments: p.table()}
	case 7:
		return &amqp.ExchangeUnbind{Destination: p.name(), Source: p.name(), RoutingKey: p.name(), NoWait: p.bool(), Arguments: p.table()}
	case 8:
		return &amqp.QueueDeclare{Queue: p.name(), Passive: p.bool(), Durable: p.bool(), Exclusive: p.bool(), AutoDelete: p.bool(), NoWait: p.bool(), Arguments: p.table()}
	case 9:
		return &amqp.QueueBind{Queue: p.name(), Exchange: p.name(), RoutingKey: p.name(), NoWait: p.bool(), Arguments: p.table()}
	case 10:
		return &amqp.QueueUnbind{Queue: p.name(), Exchange: p.name(), RoutingKey: p.name(), Arguments: p.table()}
	case 11:
		return &amqp.QueuePurge{Queue: p.name(), NoWait: p.bool()}
	case 12:
		return &amqp.QueueDelete{Queue: p.name(), IfUnused: p.bool(), IfEmpty: p.bool(), NoWait: p.bool()}
	case 13:
		return &amqp.BasicQos{PrefetchSize: uint32(p.byte() % 2), PrefetchCount: uint16(p.byte() % 4), Global: p.bool()}
	case 14, 15:
		return &amqp.BasicConsume{Queue: p.name(), ConsumerTag: p.name(), NoLocal: p.bool(), NoAck: p.bool(), Exclusive: p.bool(), NoWait: p.bool(), Arguments: p.table()}
	case 16:
		return &amqp.BasicCancel{ConsumerTag: p.name(), NoWait: p.bool()}
	case 17, 18, 19:
		return &amqp.BasicPublish{Exchange: p.name(), RoutingKey: p.name(), Mandatory: p.bool(), Immediate: p.byte() == 0xff}
	case 20:
		return &amqp.BasicGet{Queue: p.name(), NoAck: p.bool()}
	case 21:
		return &amqp.BasicAck{DeliveryTag: uint64(p.byte() % 8), Multiple: p.bool()}
	case 22:
		return &amqp.BasicReject{DeliveryTag: uint64(p.byte() % 8), Requeue: p.bool()}
	case 23:
		return &amqp.BasicNack{DeliveryTag: uint64(p.byte() % 8), Multiple: p.bool(), Requeue: p.bool()}
	case 24:
		return &amqp.ConfirmSelect{Nowait: p.bool()}
	case 25:
		return &amqp.TxSelect{}
	case 26:
		return &amqp.TxCommit{}
	case 27:
		return &amqp.TxRollback{}
	case 28:
		return &amqp.BasicRecover{Requeue: p.bool()}
	case 29:
		return &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess}
	case 30:
		return &amqp.ConnectionTuneOk{ChannelMax: uint16(p.byte()), FrameMax: uint32(p.byte()) << 8, Heartbeat: uint16(p.byte() % 2)}
	default:
		return &amqp.ConnectionOpen{VirtualHost: p.name()}
	}
}

// hugeBodySizes are what a content header's size byte 0xf8 and above
// announces: big bodies, the 512 MiB limit and beyond it.
var hugeBodySizes = [8]uint64{64 << 10, 1 << 20, 128 << 20, 256 << 20, maxBodySize, maxBodySize + 1, 1 << 40, 1<<64 - 1}

// bodySize is a content header's body-size: small mostly, huge for the
// size bytes 0xf8 and above.
func (p *fuzzProgram) bodySize() uint64 {
	b := p.byte()
	if b >= 0xf8 {
		return hugeBodySizes[b-0xf8]
	}
	return uint64(b)
}

// bytes runs the program: an optional valid handshake (mode bit 0), then
// opcodes until the input ends.
func (p *fuzzProgram) bytes() []byte {
	p.out = append(p.out, "AMQP\x00\x00\x09\x01"...)
	if m := p.byte(); m&fuzzHandshake != 0 {
		var props amqp.Table
		if m&fuzzAlarm != 0 {
			props = amqp.Table{"capabilities": amqp.Table{"connection.blocked": true}}
		}
		p.out = amqp.AppendMethodFrame(p.out, 0, &amqp.ConnectionStartOk{ClientProperties: props, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
		p.out = amqp.AppendMethodFrame(p.out, 0, &amqp.ConnectionTuneOk{ChannelMax: 16, FrameMax: 8192})
		p.out = amqp.AppendMethodFrame(p.out, 0, &amqp.ConnectionOpen{VirtualHost: "/"})
	}
	for p.more() {
		switch op := p.byte(); op % 8 {
		case 0, 1, 2:
			p.out = amqp.AppendMethodFrame(p.out, p.channel(), p.method())
		case 3:
			// A content header of basic (or another class), with a
			// body size that may lie.
			cls := amqp.ClassBasic
			if p.byte() == 0xff {
				cls = amqp.ClassQueue
			}
			props := (&amqp.Properties{ContentType: p.name(), DeliveryMode: p.byte() % 3, Headers: p.table()}).Append(nil)
			p.out = amqp.AppendHeaderFrame(p.out, p.channel(), cls, p.bodySize(), props)
		case 4:
			p.out = amqp.AppendFrame(p.out, amqp.FrameBody, p.channel(), p.take(int(p.byte()%80)))
		case 5:
			p.out = amqp.AppendHeartbeatFrame(p.out)
		case 6:
			// A frame of any type with any payload.
			p.out = amqp.AppendFrame(p.out, p.byte(), p.channel(), p.take(int(p.byte()%32)))
		default:
			// Raw bytes: torn frames, bad frame-end octets, huge sizes.
			p.out = append(p.out, p.take(int(p.byte()%16))...)
		}
	}
	return p.out
}

func TestFuzzProgramIsTotal(t *testing.T) {
	for _, seed := range fuzzSeeds() {
		p := fuzzProgram{data: seed}
		out := p.bytes()
		if len(out) < 8 {
			t.Fatalf("program %v produced %d bytes", seed, len(out))
		}
	}
}
