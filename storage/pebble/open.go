package pebble

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Defaults of Open, chosen for a broker: messages are small, written once and
// mostly deleted soon after.
const (
	// DefaultCacheSize is the block cache size.
	DefaultCacheSize = 64 << 20
	// DefaultMemTableSize is larger than Pebble's 4 MiB default: a message
	// published and acked within one memtable's life never reaches an
	// sstable (the flush drops the record and keeps only its tombstone),
	// and fewer flushes mean fewer L0 files to compact.
	DefaultMemTableSize = 64 << 20
)

// Option configures Open.
type Option func(*config)

type config struct {
	fs           vfs.FS
	cacheSize    int64
	memTableSize uint64
	logger       *slog.Logger
	tweak        []func(*pebble.Options)
}

// WithFS makes Pebble use fs instead of the operating system's file system:
// vfs.NewMem() for tests, or an error-injecting vfs for fault tests.
func WithFS(fs vfs.FS) Option { return func(c *config) { c.fs = fs } }

// WithCacheSize sets the block cache size in bytes (DefaultCacheSize when
// not positive).
func WithCacheSize(bytes int64) Option { return func(c *config) { c.cacheSize = bytes } }

// WithMemTableSize sets the memtable size in bytes (DefaultMemTableSize when
// zero). Pebble keeps up to two memtables in memory.
func WithMemTableSize(bytes uint64) Option { return func(c *config) { c.memTableSize = bytes } }

// WithLogger sends Pebble's log messages to l (slog.Default() when nil),
// tagged component=pebble.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithPebbleOptions lets f adjust the pebble.Options Open built, after every
// other option: the escape hatch for what no Option covers. f must not turn
// the WAL off, or Persistent records would not be durable.
func WithPebbleOptions(f func(*pebble.Options)) Option {
	return func(c *config) { c.tweak = append(c.tweak, f) }
}

// Open opens, creating it if needed, the Pebble database in dir that
// storage/pebble, meta/local and the unacked index share. The caller owns the
// DB and closes it once every store using it is done.
//
// The write-ahead log is on. Writes are not fsynced one by one: a store asks
// for pebble.Sync only when a write must be durable before it returns (a
// batch holding a persistent message), and Pebble's commit pipeline lets
// concurrent synced writes share one fsync. Everything else reaches disk
// with the next synced write or when the DB is closed, in WAL order, so a
// crash loses a suffix of unsynced writes, never a write before a kept one.
func Open(dir string, opts ...Option) (*pebble.DB, error) {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.cacheSize <= 0 {
		c.cacheSize = DefaultCacheSize
	}
	if c.memTableSize == 0 {
		c.memTableSize = DefaultMemTableSize
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	po := &pebble.Options{
		FS:                 c.fs,
		CacheSize:          c.cacheSize,
		MemTableSize:       c.memTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             slogLogger{c.logger.With("component", "pebble")},
	}
	for _, f := range c.tweak {
		f(po)
	}
	if po.DisableWAL {
		return nil, fmt.Errorf("storage/pebble: open %s: the WAL must stay on", dir)
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("storage/pebble: open %s: %w", dir, err)
	}
	return db, nil
}

// slogLogger adapts slog to pebble.Logger.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Infof(format string, args ...any) { s.l.Info(fmt.Sprintf(format, args...)) }

func (s slogLogger) Errorf(format string, args ...any) { s.l.Error(fmt.Sprintf(format, args...)) }

// Fatalf logs and panics with a *fatalError. Pebble calls it when it cannot
// go on: a failed WAL write leaves its commit pipeline unusable. Its default
// logger exits the process, which a library must not do to its host. On a
// store's commit path the panic is turned back into an error (see commit);
// anywhere else (a background flush or compaction) it is a crash with a
// stack, which is the right outcome for a disk that lost writes.
func (s slogLogger) Fatalf(format string, args ...any) {
	e := newFatalError(format, args)
	s.l.Error(e.msg, "fatal", true)
	panic(e)
}

// ErrFailed is wrapped by the errors of writes made after, or while, Pebble
// hit an unrecoverable error (typically a failed WAL write or sync). From
// then on every synced write fails (an unsynced one may still report
// success, as it never waits for the WAL, but it is never durable); reads
// still work. Close the DB and restart.
var ErrFailed = errors.New("storage/pebble: database failed")

// fatalError is the panic value of slogLogger.Fatalf. It wraps ErrFailed and
// every error among Fatalf's arguments, so errors.Is finds the cause.
type fatalError struct {
	msg  string
	errs []error
}

func newFatalError(format string, args []any) *fatalError {
	e := &fatalError{msg: fmt.Sprintf(format, args...), errs: []error{ErrFailed}}
	for _, a := range args {
		if err, ok := a.(error); ok {
			e.errs = append(e.errs, err)
		}
	}
	return e
}

func (e *fatalError) Error() string   { return "storage/pebble: database failed: " + e.msg }
func (e *fatalError) Unwrap() []error { return e.errs }

// batch is a pebble.Batch that goes back to Pebble's pool when released,
// unless its commit failed: Pebble may still refer to a batch whose commit
// failed (its own DB.LogData does not release one either).
type batch struct {
	*pebble.Batch
	failed bool
}

func (b *batch) commit(opts *pebble.WriteOptions) error {
	err := commit(b.Batch, opts)
	b.failed = err != nil
	return err
}

func (b *batch) release() {
	if !b.failed {
		b.Close()
	}
}

// commit commits b, turning the panic of a fatal commit error back into an
// error, so a failed disk fails the write instead of the broker.
func commit(b *pebble.Batch, opts *pebble.WriteOptions) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(*fatalError)
			if !ok {
				panic(r)
			}
			err = fe
		}
	}()
	return b.Commit(opts)
}
