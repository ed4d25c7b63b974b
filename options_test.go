package broker_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// TestOptionsThatCouldNeverWork: New refuses, with an error naming the
// field, settings that used to be accepted and then silently lost data or
// never worked.
func TestOptionsThatCouldNeverWork(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		opts    broker.Options
		wantErr string // "" accepted
	}{
		{"in-memory Shards with DataDir", broker.Options{DataDir: dir, Storage: broker.StorageOptions{Shards: memory.New()}},
			"Options.Storage.Shards is an in-memory store but DataDir is set"},
		{"in-memory Meta with DataDir", broker.Options{DataDir: dir, Storage: broker.StorageOptions{Meta: metamemory.New()}},
			"Options.Storage.Meta is an in-memory store but DataDir is set"},
		{"in-memory Unacked with DataDir", broker.Options{DataDir: dir, Storage: broker.StorageOptions{Unacked: unacked.NewMemoryIndex()}},
			"Options.Storage.Unacked is an in-memory store but DataDir is set"},
		{"in-memory stores without DataDir", broker.Options{Storage: broker.StorageOptions{Shards: memory.New(), Meta: metamemory.New(), Unacked: unacked.NewMemoryIndex()}}, ""},
		{"empty password", broker.Options{Users: []broker.User{{Name: "app"}}}, `Options.Users[0] ("app"): empty password`},
		{"empty password with EXTERNAL", broker.Options{Users: []broker.User{{Name: "app"}}, AuthMechanisms: []string{"EXTERNAL"}}, ""},
		{"limit on a vhost that does not exist", broker.Options{Limits: broker.LimitOptions{VHostMaxConnections: map[string]int{"nope": 5}}},
			`Options.Limits.VHostMaxConnections["nope"]: no such vhost`},
		{"limit on the default vhost by either name", broker.Options{Limits: broker.LimitOptions{VHostMaxConnections: map[string]int{"": 5}}}, ""},
		{"-1 means no limit", broker.Options{Limits: broker.LimitOptions{MaxConnections: -1, MaxQueuesPerVHost: -1, VHostMaxConnections: map[string]int{"/": -1}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := broker.New(tc.opts)
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.NoError(t, b.Close())
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			require.ErrorContains(t, err, "broker: ")
		})
	}

	t.Run("limit on a vhost stored in DataDir", func(t *testing.T) {
		dir := t.TempDir()
		b, err := broker.New(broker.Options{DataDir: dir})
		require.NoError(t, err)
		addVHost(t, b, "stored")
		require.NoError(t, b.Close())
		b, err = broker.New(broker.Options{DataDir: dir, Limits: broker.LimitOptions{VHostMaxConnections: map[string]int{"stored": 1}}})
		require.NoError(t, err)
		require.NoError(t, b.Close())
	})
}

// TestDataDirErrors: a DataDir that cannot be used says why; the text used
// to be "open /proc/LOCK: no such file or directory", and a second broker
// on the same DataDir got "resource temporarily unavailable" (another
// process; storage/pebble's TestOpenErrorTexts covers that case).
func TestDataDirErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	inUse := t.TempDir()
	b := startBroker(t, broker.Options{DataDir: inUse})
	_ = b
	for _, tc := range []struct {
		dir, want string
	}{
		{"/proc", "broker: Options.DataDir: storage/pebble: open /proc: the data directory cannot be written"},
		{file, "cannot be created"},
		{inUse, "already open in this process; only one may use a data directory at a time"},
	} {
		_, err := broker.New(broker.Options{DataDir: tc.dir})
		require.ErrorContains(t, err, tc.want, tc.dir)
	}
}

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu   *sync.Mutex
	recs *[]slog.Record
	pre  []slog.Attr
}

func newLogRecorder() *logRecorder {
	return &logRecorder{mu: &sync.Mutex{}, recs: &[]slog.Record{}}
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(l.pre...)
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.recs = append(*l.recs, r)
	return nil
}

func (l *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorder{mu: l.mu, recs: l.recs, pre: append(slices.Clone(l.pre), as...)}
}

func (l *logRecorder) WithGroup(string) slog.Handler { return l }

// find returns the records with message msg, each with its attributes.
func (l *logRecorder) find(msg string) []logLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logLine
	for _, r := range *l.recs {
		if msg != "" && r.Message != msg {
			continue
		}
		line := logLine{level: r.Level, msg: r.Message, attrs: map[string]string{}}
		r.Attrs(func(a slog.Attr) bool {
			line.attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, line)
	}
	return out
}

type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// TestLogLevels: INFO is kept for what an operator acts on. Pebble's
// routine messages are DEBUG (component=pebble); a channel closed by an
// error is WARN; a direct connection (the management API's get) logs its
// open and its close, both at DEBUG (it used to log only the close, at
// INFO); a refused login's log line says why (it said reason="").
func TestLogLevels(t *testing.T) {
	rec := newLogRecorder()
	b := startBroker(t, broker.Options{DataDir: t.TempDir(), Logger: slog.New(rec)})
	pebbleLines := 0
	for _, l := range rec.find("") {
		if l.attrs["component"] == "pebble" {
			pebbleLines++
			require.Less(t, l.level, slog.LevelInfo, "Pebble's %q", l.msg)
		}
	}
	require.Positive(t, pebbleLines, "Pebble logs with component=pebble")

	// A channel error.
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "q", true)
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	amqptest.RequireCode(t, err, amqp091.PreconditionFailed)
	// The session logs the close after sending it, so the client may see
	// the error first.
	var closing []logLine
	amqptest.Poll(t, func() bool {
		closing = rec.find("session: closing channel")
		return len(closing) > 0
	}, "no log line for the channel error")
	require.Len(t, closing, 1)
	require.Equal(t, slog.LevelWarn, closing[0].level)

	// The management API's get.
	status, _, _ := amqptest.NewAPI(t, b.ManagementHandler()).Do("POST", "/api/queues/%2F/q/get", "guest", `{"count":1,"ackmode":"ack_requeue_false","encoding":"auto"}`)
	require.Equal(t, 200, status)
	var opened, closed int
	for _, l := range rec.find("") {
		if len(l.attrs["conn"]) < len("direct#") || l.attrs["conn"][:len("direct#")] != "direct#" {
			continue
		}
		require.Equal(t, slog.LevelDebug, l.level, "direct connection: %q", l.msg)
		switch l.msg {
		case "session: direct connection open":
			opened++
		case "session: client closed connection":
			closed++
		}
	}
	require.Equal(t, 1, opened, "the direct connection's open is logged")
	require.Equal(t, 1, closed, "and its close")

	// A refused login.
	_, err = amqp091.Dial("amqp://guest:wrong@" + b.Addr().String() + "/")
	require.Error(t, err)
	refused := rec.find("session: login refused")
	require.Len(t, refused, 1)
	require.Equal(t, "invalid credentials", refused[0].attrs["reason"])
	require.Equal(t, "guest", refused[0].attrs["user"])
}
