package pebble

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ReserveFile is the name of the reserve file in the database directory.
// Pebble ignores files whose names it does not know.
const ReserveFile = "WARREN-RESERVE"

// DiskReserve keeps disk space in reserve for the moment the file system
// fills up (CockroachDB's ballast file, which Pebble's vfs.OnDiskFull was
// written for). Pebble cannot survive a failed write-ahead-log or MANIFEST
// write: rotating the WAL panics with its locks in a state no recover can
// repair, and a failed MANIFEST write calls Logger.Fatalf from a background
// goroutine. So the disk must never refuse Pebble such a write. With a
// reserve, Open wraps the file system so that the first WAL, MANIFEST,
// OPTIONS or marker write to fail with ENOSPC deletes the reserve file,
// calls OnFull, and is retried once, now with the reserve's bytes free
// (vfs.OnDiskFull). Sstables and blob files are left out: a flush or
// compaction that fails is removed and retried by Pebble, so it calls
// OnFull but does not spend the reserve. The caller stops the writes that
// grow the database (the broker raises its disk alarm and blocks
// publishers) and lets the ones that shrink it (consumers' acks) run on
// the reserve. Restore recreates the file once the caller has seen enough
// space come back.
//
// What the reserve must cover, once released, is what Pebble writes before
// the drain frees space: the flush of the memtables it holds (an sstable
// of up to their size) and the WAL of the writes that go on meanwhile,
// which fill the next memtable, at most twice the current one (Pebble
// starts memtables at 256 KiB and doubles each new one up to the
// configured size); and what a clean shutdown and the restart after it
// write, which is small (a new MANIFEST, OPTIONS and marker files: the
// memtable replayed from the WAL is the one already covered), 1 MiB. So a
// reserve of the default size follows the memtables: four times what they
// hold plus 1 MiB, 2 MiB for a fresh database, growing with them (Resize)
// to twice the configured memtable size, and never shrinking while the
// directory lives. A small database has a small reserve; one that took
// the full memtable size keeps the full reserve.
//
// A DiskReserve is configured by its exported fields before it is passed to
// WithDiskReserve and bound to one database by Open; its methods are safe
// for concurrent use afterwards.
type DiskReserve struct {
	// Size is the reserve's size in bytes. Zero (the default) sizes it by
	// the memtables, as above.
	Size int64
	// OnFull is called when a write failed with ENOSPC. For a write
	// Pebble cannot survive (critical), the reserve file was deleted
	// first and released is the bytes that freed; 0 means the reserve was
	// already gone and the write, retried once, will most likely fail. All
	// writes to the database's file system may wait while OnFull runs, so
	// it must be quick and must not write to the database.
	OnFull func(released int64, critical bool)

	fs       vfs.FS // the unwrapped file system
	dir      string
	path     string
	headroom int64
	// ceiling is the most a reserve of the default size grows to (twice
	// the configured memtable size); 0 for a fixed Size.
	ceiling int64
	// db is the database whose memtables a default-size reserve follows,
	// set by Open once Pebble opened it; rotated is set when Pebble
	// created a WAL (a new memtable) since Resize last looked.
	db      atomic.Pointer[pebble.DB]
	rotated atomic.Bool
	// low is set while free space is within a few headrooms of running
	// out: admit then measures it for every batch, not only large ones.
	low atomic.Bool

	mu struct {
		sync.Mutex
		// target is the size the reserve should have; onDisk what the
		// file has (0 when it is missing).
		target, onDisk int64
	}
}

// Reserve sizes: a default-size reserve is at least reserveFloor, and
// reserveSlack covers a clean shutdown and restart.
const (
	initialMemTable = 256 << 10 // Pebble's first memtable
	reserveSlack    = 1 << 20
	reserveFloor    = 4*initialMemTable + reserveSlack
)

// reserveFor is the reserve a default-size reserve needs while Pebble's
// memtables hold memtables bytes (DiskReserve says why).
func reserveFor(memtables, ceiling int64) int64 {
	return min(max(4*memtables+reserveSlack, reserveFloor), ceiling)
}

// WithDiskReserve makes Open keep r's reserve file in the database
// directory (see DiskReserve).
func WithDiskReserve(r *DiskReserve) Option { return func(c *config) { c.reserve = r } }

// Headroom is how much free space, beyond the caller's own limit, the
// database may claim at once without warning: a new WAL grows to about
// the configured memtable size (110% is Pebble's bound for it), and the
// memtable it replaces is flushed into an sstable of up to its size while
// the old WAL still exists. It is sized by the configured memtable, not
// the one in use, so the disk alarm does not wait for the memtables to
// grow. A disk alarm raised below limit+Headroom (free space not counting
// the reserve) keeps the reserve for real emergencies.
func (r *DiskReserve) Headroom() int64 { return r.headroom }

// Missing returns how many bytes of the reserve are not on disk: 0 while
// the reserve file has its size, all of it after it was released (or
// could not be created), the difference after Resize raised the size.
// Free space minus Missing is the space the database may still use
// before it eats into what the reserve will need back.
func (r *DiskReserve) Missing() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.target - r.mu.onDisk
}

// Target returns the size the reserve has when nothing is missing.
func (r *DiskReserve) Target() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.target
}

// Resize raises the size of a default-size reserve to what Pebble's
// memtables need now (DiskReserve says how much), after Pebble created a
// WAL since the last call; at other times, and for a fixed Size, it does
// nothing. It allocates the growth at once when the file system has room
// for it and the headroom besides; otherwise Missing reports it until
// Restore can. It reads the DB's metrics, so call it without holding a
// lock a Pebble write may wait for (OnFull's); the broker's disk monitor
// calls it before each sample, and a GuardedBy store before a batch after
// a new WAL.
func (r *DiskReserve) Resize() {
	db := r.db.Load()
	if r.ceiling == 0 || db == nil || !r.rotated.Swap(false) {
		return
	}
	want := reserveFor(int64(db.Metrics().MemTable.Size), r.ceiling)
	r.mu.Lock()
	defer r.mu.Unlock()
	if want <= r.mu.target {
		return
	}
	r.mu.target = want
	if r.mu.onDisk == 0 {
		return // released: Restore brings it back at the new size
	}
	if du, err := r.fs.GetDiskUsage(r.dir); err == nil && int64(du.AvailBytes) < want-r.mu.onDisk+r.headroom {
		return
	}
	r.mu.onDisk, _ = growReserve(r.fs, r.path, r.mu.onDisk, want)
}

// Restore brings the reserve file back to its size when some of it is
// missing: recreated after a release (leaving no partial file when the
// file system has no room), or grown after Resize (keeping what it could
// allocate). It fails when the file system has no room.
func (r *DiskReserve) Restore() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.onDisk >= r.mu.target || r.fs == nil {
		return nil
	}
	if r.mu.onDisk > 0 {
		var err error
		if r.mu.onDisk, err = growReserve(r.fs, r.path, r.mu.onDisk, r.mu.target); err != nil {
			return fmt.Errorf("storage/pebble: grow disk reserve: %w", err)
		}
		return nil
	}
	if err := createReserve(r.fs, r.path, r.mu.target); err != nil {
		return fmt.Errorf("storage/pebble: restore disk reserve: %w", err)
	}
	r.mu.onDisk = r.mu.target
	return nil
}

// bind ties r to the database in dir, on fs (unwrapped), with memtables of
// memTableSize bytes. A reserve file left by an earlier run counts when it
// has a fixed Size's size, or for a default-size reserve when it is no
// larger than the ceiling (it never shrinks); another is removed. A
// missing reserve is created when the file system has room for it and the
// headroom besides.
func (r *DiskReserve) bind(fs vfs.FS, dir string, memTableSize uint64) error {
	mt := int64(memTableSize)
	r.headroom = mt + mt/10 + mt
	r.mu.target = r.Size
	if r.Size <= 0 {
		r.ceiling = 2 * mt
		r.mu.target = reserveFor(0, r.ceiling)
		r.rotated.Store(true)
	}
	r.fs, r.dir, r.path = fs, dir, fs.PathJoin(dir, ReserveFile)
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if st, err := fs.Stat(r.path); err == nil {
		switch size := st.Size(); {
		case r.ceiling == 0 && size == r.Size, r.ceiling > 0 && size > 0 && size <= r.ceiling:
			r.mu.onDisk = size
			r.mu.target = max(r.mu.target, size)
			return nil
		}
		if err := fs.Remove(r.path); err != nil {
			return fmt.Errorf("remove disk reserve of %d bytes: %w", st.Size(), err)
		}
	}
	if du, err := fs.GetDiskUsage(dir); err == nil && int64(du.AvailBytes) < r.mu.target+r.headroom {
		return nil // no room: Missing reports it, the caller restores it later
	}
	if err := createReserve(fs, r.path, r.mu.target); err != nil && !isENOSPC(err) {
		return err
	} else if err == nil {
		r.mu.onDisk = r.mu.target
	}
	return nil
}

// ErrDiskFull is wrapped by the error of an Append refused for want of
// disk space (GuardedBy).
var ErrDiskFull = errors.New("storage/pebble: disk full")

// admitAlways is the batch size from which admit always measures free
// space; smaller batches are measured only while space is low.
const admitAlways = 1 << 20

// admit reports ErrDiskFull when a batch of n bytes would leave less free
// space, not counting the missing reserve, than the headroom once written
// twice (WAL, then flushed sstable). A nil or unbound r admits everything.
func (r *DiskReserve) admit(n int64) error {
	if r == nil || r.fs == nil {
		return nil
	}
	if r.rotated.Load() {
		r.Resize()
	}
	if n < admitAlways && !r.low.Load() {
		return nil
	}
	du, err := r.fs.GetDiskUsage(r.dir)
	if err != nil {
		return nil // unknown: let Pebble try
	}
	left := int64(du.AvailBytes) - r.Missing() - r.headroom
	r.low.Store(left < 4*r.headroom)
	if left >= 2*n {
		return nil
	}
	r.bulkFull()
	return fmt.Errorf("%w: a batch of %d bytes needs %d free besides the reserve and headroom, %d are", ErrDiskFull, n, 2*n, max(left, 0))
}

// release is vfs.OnDiskFull's callback: Pebble's writes wait until it
// returns, then the write that failed is retried once.
func (r *DiskReserve) release() {
	r.mu.Lock()
	freed := int64(0)
	if r.mu.onDisk > 0 {
		if err := r.fs.Remove(r.path); err == nil || errors.Is(err, os.ErrNotExist) {
			freed = r.mu.onDisk
			r.mu.onDisk = 0
		}
	}
	r.mu.Unlock()
	if r.OnFull != nil {
		r.OnFull(freed, true)
	}
}

// bulkFull reports a flush or compaction that failed with ENOSPC (Pebble's
// BackgroundError): it spends no reserve.
func (r *DiskReserve) bulkFull() {
	if r.OnFull != nil {
		r.OnFull(0, false)
	}
}

// guardFS sends the files Pebble cannot survive a failed write to through
// critical (vfs.OnDiskFull, which spends the reserve), and sstables and
// blob files straight to the file system.
type guardFS struct {
	vfs.FS
	critical vfs.FS
}

// bulk reports whether name is a file whose failed write Pebble survives:
// an sstable or a blob file of a flush or compaction.
func bulk(name string) bool {
	ext := filepath.Ext(name)
	return ext == ".sst" || ext == ".blob"
}

func (g guardFS) pick(name string) vfs.FS {
	if bulk(name) {
		return g.FS
	}
	return g.critical
}

func (g guardFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return g.pick(name).Create(name, cat)
}

func (g guardFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return g.pick(name).OpenReadWrite(name, cat, opts...)
}

func (g guardFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return g.pick(newname).ReuseForWrite(oldname, newname, cat)
}

func (g guardFS) Link(oldname, newname string) error { return g.critical.Link(oldname, newname) }

func (g guardFS) Rename(oldname, newname string) error { return g.critical.Rename(oldname, newname) }

func (g guardFS) MkdirAll(dir string, perm os.FileMode) error { return g.critical.MkdirAll(dir, perm) }

func (g guardFS) OpenDir(name string) (vfs.File, error) { return g.critical.OpenDir(name) }

func (g guardFS) Unwrap() vfs.FS { return g.FS }

// createReserve writes a file of size bytes at path: allocated at once
// where the operating system can (fallocate), else written with zeros. A
// sparse file would reserve nothing. On failure the partial file is
// removed.
func createReserve(fs vfs.FS, path string, size int64) (err error) {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = fs.Remove(path)
		}
	}()
	if fd := f.Fd(); fd != vfs.InvalidFd {
		switch err := allocate(fd, size); {
		case err == nil:
			return f.Sync()
		case isENOSPC(err):
			return err
		}
		// Not supported here: write it.
	}
	zeros := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(zeros)))
		if _, err := f.Write(zeros[:n]); err != nil {
			return err
		}
		left -= n
	}
	return f.Sync()
}

// growReserve extends the reserve file at path from size from to size to,
// allocated as createReserve allocates. It returns the size the file has
// afterwards: to, or on failure what it got to (all of it allocated).
func growReserve(fs vfs.FS, path string, from, to int64) (size int64, err error) {
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return from, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			size = from
			if st, serr := fs.Stat(path); serr == nil {
				size = min(max(st.Size(), from), to)
			}
		}
	}()
	if fd := f.Fd(); fd != vfs.InvalidFd {
		switch err := allocate(fd, to); {
		case err == nil:
			return to, f.Sync()
		case isENOSPC(err):
			return from, err
		}
	}
	zeros := make([]byte, 1<<20)
	for off := from; off < to; {
		n := min(to-off, int64(len(zeros)))
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return from, err
		}
		off += n
	}
	return to, f.Sync()
}

// isENOSPC reports whether err says the file system is full.
func isENOSPC(err error) bool { return errors.Is(err, syscall.ENOSPC) }
