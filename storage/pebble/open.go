package pebble

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Defaults of Open, chosen for a broker: messages are small, written once and
// mostly deleted soon after.
const (
	// DefaultCacheSize is the block cache size.
	DefaultCacheSize = 64 << 20
	// DefaultMemTableSize is Pebble's own default. A message published and
	// acked within one memtable's life never reaches an sstable (the flush
	// drops the record with its tombstone), and Pebble keeps two memtables
	// resident once enough was written (the active one and one flushed,
	// kept for reuse), so the size trades RSS against the records of a
	// lagging consumer reaching sstables. 4 MiB holds a few hundred
	// milliseconds of publishes and acks at tens of thousands of messages
	// a second, far more than a consumer that keeps up leaves waiting:
	// against 8 MiB it cost no measurable CPU per message and 8 MiB less
	// memory (docs/performance.md, "acks that no longer wait"). It was
	// 8 MiB while acks waited for the publishers' fsync and messages sat
	// in the queue for 200-300 ms; 64 MiB held 128 MiB of RSS. On a small
	// file system Open halves it until it is at most 1/16 of the file
	// system (and no less than minMemTableSize): a WAL grows to about its
	// size, and a memtable cannot be flushed on a disk no larger than it.
	DefaultMemTableSize = 4 << 20

	minMemTableSize = 1 << 20
)

// Option configures Open.
type Option func(*config)

type config struct {
	fs           vfs.FS
	cacheSize    int64
	memTableSize uint64
	logger       *slog.Logger
	reserve      *DiskReserve
	pacer        *SyncPacer
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
// tagged component=pebble: its informational chatter (WAL replay, flushes)
// at DEBUG, its errors at ERROR, background errors at WARN when the disk
// is full (they are retried) and ERROR otherwise, and write stalls at
// WARN.
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
	ownFS := c.fs == nil
	if ownFS {
		c.fs = vfs.Default
	}
	if c.memTableSize == 0 {
		c.memTableSize = memTableSizeFor(c.fs, dir)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	log := c.logger.With("component", "pebble")
	po := &pebble.Options{
		FS:                 c.fs,
		CacheSize:          c.cacheSize,
		MemTableSize:       c.memTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             slogLogger{log},
		EventListener:      eventListener(log, c.reserve),
	}
	if c.pacer != nil {
		po.WALMinSyncInterval = c.pacer.interval
	}
	for _, f := range c.tweak {
		f(po)
	}
	if po.DisableWAL {
		return nil, fmt.Errorf("storage/pebble: open %s: the WAL must stay on", dir)
	}
	// Lock the directory before anything touches it (the reserve), and
	// say plainly why when that fails.
	lock, err := lockDir(po.FS, dir)
	if err != nil {
		return nil, err
	}
	// Open takes its own reference; this one goes now, so closing the DB
	// releases the lock (Lock is reference-counted).
	defer lock.Close()
	po.Lock = lock
	if r := c.reserve; r != nil {
		if err := r.bind(po.FS, dir, po.MemTableSize); err != nil {
			return nil, fmt.Errorf("storage/pebble: open %s: disk reserve: %w", dir, err)
		}
		po.FS = guardFS{FS: po.FS, critical: vfs.OnDiskFull(po.FS, r.release)}
	}
	po.FS = walFS{po.FS}
	if ownFS {
		po.WithFSDefaults() // Pebble's disk-health checks, as without an FS
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("storage/pebble: open %s: %w", dir, err)
	}
	if r := c.reserve; r != nil {
		r.db.Store(db)
	}
	return db, nil
}

// walFS preallocates the write-ahead logs as they are written, a
// walPreallocation at a time. Pebble preallocates each new WAL at 110% of
// the configured memtable size (its walPreallocateSize, RocksDB's rule),
// however small the memtable in use is: 70 MiB of disk for the first WAL
// of a fresh database with 64 MiB memtables, and as much for
// every WAL it rotates to. Allocating ahead of the writes keeps what
// preallocation is for (the file's blocks come in large extents, not
// page by page at writeback) at the cost of at most one step of unused
// disk per WAL. Pebble ignores preallocation errors, and so does this: a
// write the disk refuses is the reserve's business either way.
type walFS struct{ vfs.FS }

// walPreallocation is how far ahead of its writes a WAL is allocated.
const walPreallocation = 1 << 20

func (w walFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return wrapWAL(name)(w.FS.Create(name, cat))
}

func (w walFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return wrapWAL(newname)(w.FS.ReuseForWrite(oldname, newname, cat))
}

func (w walFS) Unwrap() vfs.FS { return w.FS }

// wrapWAL returns what hands a Create's results back, with a WAL's file
// wrapped in a walFile.
func wrapWAL(name string) func(vfs.File, error) (vfs.File, error) {
	return func(f vfs.File, err error) (vfs.File, error) {
		if err != nil || !strings.HasSuffix(name, ".log") {
			return f, err
		}
		return &walFile{File: f}, nil
	}
}

// walFile is a WAL file that ignores Pebble's preallocation and
// preallocates ahead of its writes instead. Pebble writes a WAL from one
// goroutine, sequentially, with Write.
type walFile struct {
	vfs.File
	written, allocated int64
}

// Preallocate is Pebble's request for 110% of the memtable size: ignored.
func (*walFile) Preallocate(offset, length int64) error { return nil }

func (f *walFile) Write(p []byte) (int, error) {
	if end := f.written + int64(len(p)); end > f.allocated {
		step := (end - f.allocated + walPreallocation - 1) / walPreallocation * walPreallocation
		_ = f.File.Preallocate(f.allocated, step)
		f.allocated += step
	}
	n, err := f.File.Write(p)
	f.written += int64(n)
	return n, err
}

// ErrLocked is wrapped by Open's error when another process (or another
// Open in this one) has the database open.
var ErrLocked = errors.New("storage/pebble: data directory in use")

// lockDir creates dir if needed and takes its LOCK file. Its errors name
// the problem: a directory that cannot be created or written (Pebble's
// own text would be "open /proc/LOCK: no such file or directory"), or one
// another process holds (fcntl's "resource temporarily unavailable").
func lockDir(fs vfs.FS, dir string) (*pebble.Lock, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage/pebble: open %s: the data directory cannot be created: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(dir, fs)
	if err == nil {
		return lock, nil
	}
	var pathErr *os.PathError
	switch {
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("storage/pebble: open %s: the data directory cannot be written (is it a writable directory?): %w", dir, err)
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EACCES):
		return nil, fmt.Errorf("storage/pebble: open %s: locked by another process; only one may use a data directory at a time (%w: %w)", dir, ErrLocked, err)
	case strings.Contains(err.Error(), "held by current process"):
		return nil, fmt.Errorf("storage/pebble: open %s: already open in this process; only one may use a data directory at a time (%w)", dir, ErrLocked)
	}
	return nil, fmt.Errorf("storage/pebble: open %s: cannot lock the data directory: %w", dir, err)
}

// memTableSizeFor returns DefaultMemTableSize, halved until it is at most
// 1/16 of the file system holding dir (or its nearest existing parent), but
// not below minMemTableSize. When the size of the file system is unknown
// (an in-memory one) it is DefaultMemTableSize.
func memTableSizeFor(fs vfs.FS, dir string) uint64 {
	size := uint64(DefaultMemTableSize)
	for d := dir; ; {
		du, err := fs.GetDiskUsage(d)
		if err == nil {
			for size > minMemTableSize && size*16 > du.TotalBytes {
				size /= 2
			}
			return size
		}
		parent := fs.PathDir(d)
		if parent == d || !errors.Is(err, os.ErrNotExist) {
			return size
		}
		d = parent
	}
}

// eventListener logs Pebble's events that an operator may act on: a
// background error (a failed flush or compaction, retried; at WARN when
// the disk is full, since the disk alarm reports that), write stalls and a
// slow disk.
func eventListener(l *slog.Logger, r *DiskReserve) *pebble.EventListener {
	var lastFull atomic.Int64 // unix nanos of the last ENOSPC warning
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			// err.Error(), not err: slog formats with %+v, which prints
			// the stack cockroachdb/errors attached.
			if isENOSPC(err) {
				// Pebble retries at once, again and again while the disk
				// is full: warn once a minute.
				now := time.Now().UnixNano()
				if last := lastFull.Load(); now-last >= int64(time.Minute) && lastFull.CompareAndSwap(last, now) {
					l.Warn("pebble: flush or compaction failed, disk full; retrying", "err", err.Error())
				}
				if r != nil {
					r.bulkFull()
				}
				return
			}
			l.Error("pebble: background error", "err", err.Error())
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			l.Warn("pebble: write stall", "reason", info.Reason)
		},
		WriteStallEnd: func() { l.Info("pebble: write stall ended") },
		WALCreated: func(pebble.WALCreateInfo) {
			// A new memtable: a default-size reserve may have to grow.
			if r != nil {
				r.rotated.Store(true)
			}
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			l.Warn("pebble: disk slow", "op", info.OpType.String(), "path", info.Path, "duration", info.Duration)
		},
	}
}

// slogLogger adapts slog to pebble.Logger: Pebble's Infof is its routine
// chatter (WAL replay, table stats), logged at DEBUG so that INFO keeps to
// what an operator acts on.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Infof(format string, args ...any) { s.l.Debug(fmt.Sprintf(format, args...)) }

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
	failed  bool
	waiting bool // committed by commitNoSyncWait, syncWait not called yet
}

func (b *batch) commit(opts *pebble.WriteOptions) error {
	err := commit(b.Batch, opts)
	b.failed = err != nil
	return err
}

func (b *batch) release() {
	_ = b.syncWait() // Pebble's batch must not be closed before its fsync
	if b.Batch != nil && !b.failed {
		b.Close()
	}
}

// Commit commits b as b.Commit does, but turns the panic of a fatal commit
// error (DB.Apply calls Logger.Fatalf, which panics with a value wrapping
// ErrFailed when the DB was opened by Open) back into an error, so a failed
// disk fails the write instead of the process. Every user of a DB from Open
// commits through it. After such an error the batch must not be closed:
// Pebble may still refer to it.
func Commit(b *pebble.Batch, opts *pebble.WriteOptions) error { return commit(b, opts) }

// commit is Commit.
func commit(b *pebble.Batch, opts *pebble.WriteOptions) (err error) {
	defer recoverFatal(&err)
	return b.Commit(opts)
}

// commitNoSyncWait commits b with a sync it does not wait for
// (DB.ApplyNoSyncWait): once it returns, b is in the write-ahead log, in
// commit order, applied and visible, as after a synced commit (Pebble makes
// a write visible before its sync either way), and b.syncWait waits for the
// fsync that covers it. A fatal commit error comes back as commit's does.
// release waits for that fsync when syncWait was not called.
func (b *batch) commitNoSyncWait(db *pebble.DB) (err error) {
	b.waiting = true
	defer func() { b.failed = err != nil }()
	defer recoverFatal(&err)
	return db.ApplyNoSyncWait(b.Batch, pebble.Sync)
}

// syncWait waits for the fsync of a batch committed by commitNoSyncWait
// and returns its outcome.
func (b *batch) syncWait() error {
	if !b.waiting {
		return nil
	}
	b.waiting = false
	if b.failed {
		return nil // commitNoSyncWait's error was returned already
	}
	if err := b.SyncWait(); err != nil {
		// As fatal as a failed synced commit, which Pebble reports through
		// Logger.Fatalf: the WAL is unusable from now on.
		b.failed = true
		return newFatalError("pebble: fatal commit error: %v", []any{err})
	}
	return nil
}

// recoverFatal turns the panic of a fatal commit error (slogLogger.Fatalf)
// into *err; any other panic goes on.
func recoverFatal(err *error) {
	if r := recover(); r != nil {
		fe, ok := r.(*fatalError)
		if !ok {
			panic(r)
		}
		*err = fe
	}
}
