package amqptest

import (
	"fmt"
	"net"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// failed is what recorder.FailNow panics with, so a test can watch an
// assertion fail without failing itself.
type failed struct{}

// recorder is a testing.TB whose failures are recorded instead of reported.
type recorder struct {
	testing.TB
	msgs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) FailNow() { panic(failed{}) }

// fails reports whether f fails its TB.
func fails(t *testing.T, f func(tb testing.TB)) (failedNow bool) {
	r := &recorder{TB: t}
	defer func() {
		if v := recover(); v != nil {
			_, ok := v.(failed)
			require.True(t, ok, "unexpected panic %v", v)
			failedNow = true
		}
	}()
	f(r)
	return len(r.msgs) > 0
}

func TestRequireCode(t *testing.T) {
	wrapped := fmt.Errorf("declare: %w", &amqp.Error{Code: amqp.NotFound, Text: "NOT_FOUND"})
	for _, tc := range []struct {
		name string
		run  func(tb testing.TB)
		fail bool
	}{
		{"amqp091 error, same code", func(tb testing.TB) { RequireCode(tb, &amqp091.Error{Code: 404}, amqp091.NotFound) }, false},
		{"amqp091 error, other code", func(tb testing.TB) { RequireCode(tb, &amqp091.Error{Code: 404}, 406) }, true},
		{"amqp error, same code", func(tb testing.TB) { RequireCode(tb, &amqp.Error{Code: 404}, amqp.NotFound) }, false},
		{"amqp error wrapped, same code", func(tb testing.TB) { RequireCode(tb, wrapped, 404) }, false},
		{"amqp error, other code", func(tb testing.TB) { RequireCode(tb, &amqp.Error{Code: 404}, amqp.PreconditionFailed) }, true},
		{"plain error", func(tb testing.TB) { RequireCode(tb, fmt.Errorf("404"), 404) }, true},
		{"nil", func(tb testing.TB) { RequireCode(tb, nil, 404) }, true},
		{"with a message, same code", func(tb testing.TB) { RequireCode(tb, &amqp.Error{Code: 404}, 404, "step %d", 1) }, false},
		{"with a message, other code", func(tb testing.TB) { RequireCode(tb, &amqp.Error{Code: 404}, 406, "step %d", 1) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.fail, fails(t, tc.run))
		})
	}
}

// fakeServer answers the client side of a handshake on nc the way a broker
// does, then closes the connection with code and waits for close-ok.
func fakeServer(t *testing.T, nc net.Conn, code uint16) error {
	srv := NewRawClient(t, nc)
	hdr, err := srv.Frames.ReadProtocolHeader()
	if err != nil {
		return err
	}
	if string(hdr[:]) != "AMQP\x00\x00\x09\x01" {
		return fmt.Errorf("header %q", hdr)
	}
	steps := []struct {
		send amqp.Method
		want amqp.Method
	}{
		{&amqp.ConnectionStart{VersionMajor: 0, VersionMinor: 9, Mechanisms: "PLAIN", Locales: "en_US"}, &amqp.ConnectionStartOk{}},
		{&amqp.ConnectionTune{ChannelMax: 16, FrameMax: 8192}, &amqp.ConnectionTuneOk{}},
		{nil, &amqp.ConnectionOpen{}},
		{&amqp.ConnectionOpenOk{}, &amqp.ChannelOpen{}},
		{&amqp.ChannelOpenOk{}, nil},
		{&amqp.ConnectionClose{ReplyCode: code, ReplyText: "bye"}, &amqp.ConnectionCloseOk{}},
	}
	for i, s := range steps {
		if s.send != nil {
			ch := uint16(0)
			if i == 4 {
				ch = 1
			}
			if _, err := nc.Write(amqp.AppendMethodFrame(nil, ch, s.send)); err != nil {
				return err
			}
		}
		if s.want == nil {
			continue
		}
		f, err := srv.Frames.ReadFrame()
		if err != nil {
			return err
		}
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			return err
		}
		if m.Name() != s.want.Name() {
			return fmt.Errorf("step %d: got %s, want %s", i, m.Name(), s.want.Name())
		}
	}
	return nc.Close()
}

func TestRawClient(t *testing.T) {
	server, client := net.Pipe()
	t.Cleanup(func() { client.Close() })
	done := make(chan error, 1)
	go func() { done <- fakeServer(t, server, amqp.ConnectionForced) }()
	c := NewRawClient(t, client)
	c.Handshake()
	c.OpenChannel(1)
	require.Equal(t, "bye", c.ExpectClose(amqp.ConnectionForced).ReplyText)
	require.NoError(t, <-done)
}

func TestRawClientExpectCloseWrongCode(t *testing.T) {
	server, client := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	go func() {
		_, _ = server.Write(amqp.AppendMethodFrame(nil, 0, &amqp.ConnectionClose{ReplyCode: amqp.ConnectionForced}))
	}()
	require.True(t, fails(t, func(tb testing.TB) { NewRawClient(tb, client).ExpectClose(amqp.FrameError) }))
}

func TestRequireCodeSaysWhatWasChecked(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() { _, _ = recover().(failed) }()
		RequireCode(r, &amqp.Error{Code: 404, Text: "NOT_FOUND - no queue"}, 406, "declare %s", "q1")
	}()
	require.Len(t, r.msgs, 1)
	require.Contains(t, r.msgs[0], "declare q1: text: NOT_FOUND - no queue")
}

func TestRequireReply(t *testing.T) {
	refused := &amqp091.Error{Code: 403, Reason: "ACCESS_REFUSED - access to queue 'q' refused"}
	for _, tc := range []struct {
		name string
		run  func(tb testing.TB)
		fail bool
	}{
		{"code only", func(tb testing.TB) { RequireReply(tb, refused, 403) }, false},
		{"code and texts", func(tb testing.TB) { RequireReply(tb, refused, 403, "ACCESS_REFUSED", "queue 'q'") }, false},
		{"a text missing", func(tb testing.TB) { RequireReply(tb, refused, 403, "queue 'r'") }, true},
		{"the label is not the text", func(tb testing.TB) { RequireReply(tb, refused, 403, "reason") }, true},
		{"other code", func(tb testing.TB) { RequireReply(tb, refused, 404, "ACCESS_REFUSED") }, true},
		{"amqp error", func(tb testing.TB) {
			RequireReply(tb, &amqp.Error{Code: 404, Text: "NOT_FOUND - no queue"}, 404, "no queue")
		}, false},
		{"nil", func(tb testing.TB) { RequireReply(tb, nil, 404) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.fail, fails(t, tc.run))
		})
	}
}

func TestReceive(t *testing.T) {
	c := make(chan int, 1)
	c <- 7
	v, ok := Receive(t, c)
	require.True(t, ok)
	require.Equal(t, 7, v)
	close(c)
	_, ok = Receive(t, c)
	require.False(t, ok, "a closed channel is reported, not waited on")

	msgs := make(chan amqp091.Delivery)
	close(msgs)
	require.True(t, fails(t, func(tb testing.TB) { Next(tb, msgs) }), "Next needs a delivery")
	errs := make(chan *amqp091.Error)
	close(errs)
	require.True(t, fails(t, func(tb testing.TB) { AwaitClose(tb, errs) }), "a close without an error")
}

func TestPoll(t *testing.T) {
	n := 0
	Poll(t, func() bool { n++; return n == 3 }, "never")
	require.Equal(t, 3, n, "polls until cond holds, then stops")
}

func TestUserURL(t *testing.T) {
	require.Equal(t, "amqp://ad%40min:p%3Aw@127.0.0.1:5672/", UserURL("amqp://guest:guest@127.0.0.1:5672/", "ad@min", "p:w"))
	require.Equal(t, []string{"m-0", "m-1"}, Numbered("m", 2))
}
