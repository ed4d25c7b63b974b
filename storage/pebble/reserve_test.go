package pebble_test

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/pebble"
)

// walFull fails the next armed write to a WAL file with ENOSPC, once.
type walFull struct{ armed atomic.Int32 }

func (f *walFull) String() string { return "walFull" }

func (f *walFull) MaybeError(op errorfs.Op) error {
	if !strings.HasSuffix(op.Path, ".log") || (op.Kind != errorfs.OpFileWrite && op.Kind != errorfs.OpFileWriteAt) {
		return nil
	}
	if f.armed.Add(-1) == 0 {
		return syscall.ENOSPC
	}
	return nil
}

// fullEvent records an OnFull call.
type fullEvent struct {
	released int64
	critical bool
}

func recordFull(mu *sync.Mutex, events *[]fullEvent) func(int64, bool) {
	return func(released int64, critical bool) {
		mu.Lock()
		defer mu.Unlock()
		*events = append(*events, fullEvent{released, critical})
	}
}

// TestDiskReserveReleasedOnENOSPC: a WAL write refused with ENOSPC (fatal
// to Pebble: it used to fail the DB for good, or panic while rotating the
// WAL) deletes the reserve file, is retried in the space that frees, and
// succeeds; OnFull tells the caller. Restore brings the file back.
func TestDiskReserveReleasedOnENOSPC(t *testing.T) {
	ctx := context.Background()
	fault := &walFull{}
	fs := errorfs.Wrap(vfs.NewMem(), fault)
	var mu sync.Mutex
	var events []fullEvent
	r := &pebble.DiskReserve{Size: 1 << 20, OnFull: recordFull(&mu, &events)}
	h := openDB(t, "db", pebble.WithFS(fs), pebble.WithDiskReserve(r))
	require.Zero(t, r.Missing(), "reserve created at Open")
	st, err := fs.Stat("db/" + pebble.ReserveFile)
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), st.Size())

	s := pebble.New(h.DB)
	fault.armed.Store(1)
	_, err = s.Append(ctx, "q", []storage.Record{{Body: []byte("a"), Persistent: true}})
	require.NoError(t, err, "the write is retried after the reserve is released")
	require.Equal(t, []fullEvent{{released: 1 << 20, critical: true}}, events)
	require.Equal(t, int64(1<<20), r.Missing())
	_, err = fs.Stat("db/" + pebble.ReserveFile)
	require.ErrorIs(t, err, os.ErrNotExist)

	got, err := s.Read(ctx, "q", 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)

	require.NoError(t, r.Restore())
	require.Zero(t, r.Missing())
	_, err = fs.Stat("db/" + pebble.ReserveFile)
	require.NoError(t, err)
	require.Positive(t, r.Headroom())
}

// TestAppendRefusedWhenDiskFull: a batch the file system has no room for
// (twice its size, beside the headroom) is refused before it reaches
// Pebble, whose failed WAL writes are fatal, with ErrDiskFull; OnFull is
// told, no reserve is spent, and the store goes on working once there is
// room.
func TestAppendRefusedWhenDiskFull(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewMem()
	var mu sync.Mutex
	var events []fullEvent
	r := &pebble.DiskReserve{Size: 1 << 20, OnFull: recordFull(&mu, &events)}
	h := openDB(t, "db", pebble.WithFS(mem), pebble.WithDiskReserve(r))
	s := pebble.New(h.DB, pebble.GuardedBy(r))

	big := []storage.Record{{Body: bytes.Repeat([]byte("x"), 2<<20), Persistent: true}}
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: uint64(r.Headroom()) + 3<<20, TotalBytes: 1 << 30})
	_, err := s.Append(ctx, "q", big)
	require.ErrorIs(t, err, pebble.ErrDiskFull)
	require.Equal(t, []fullEvent{{released: 0, critical: false}}, events)
	require.Zero(t, r.Missing(), "a refused batch spends no reserve")
	n, err := s.Count(ctx, "q")
	require.NoError(t, err)
	require.Zero(t, n)

	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: uint64(r.Headroom()) + 5<<20, TotalBytes: 1 << 30})
	_, err = s.Append(ctx, "q", big)
	require.NoError(t, err)
}

// TestPebbleLogLevels: Pebble's routine messages (WAL replay and the
// like) are DEBUG, tagged component=pebble; they used to be INFO, which is
// for what an operator acts on.
func TestPebbleLogLevels(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dir := t.TempDir()
	h := openDB(t, dir, pebble.WithLogger(log))
	_, err := pebble.New(h.DB).Append(context.Background(), "q", []storage.Record{{Body: []byte("a"), Persistent: true}})
	require.NoError(t, err)
	h.close(t)
	openDB(t, dir, pebble.WithLogger(log)).close(t) // replays the WAL

	mu.Lock()
	defer mu.Unlock()
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		line := sc.Text()
		require.Contains(t, line, "component=pebble")
		require.Contains(t, line, "level=DEBUG", "Pebble's chatter above DEBUG: %s", line)
		lines++
	}
	require.Positive(t, lines, "Pebble said nothing at all")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestOpenErrorTexts: a directory that cannot hold a database, and one
// another process has open, fail with errors that say so (they used to
// read "open /proc/LOCK: no such file or directory" and "resource
// temporarily unavailable").
func TestOpenErrorTexts(t *testing.T) {
	if dir := os.Getenv("WARREN_TEST_HOLD_DB"); dir != "" {
		// The helper process: hold the database until stdin closes.
		db, err := pebble.Open(dir, pebble.WithLogger(quiet))
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
			return
		}
		os.Stdout.WriteString("open\n")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		_ = db.Close()
		return
	}
	t.Run("Unwritable", func(t *testing.T) {
		if _, err := os.Stat("/proc/self"); err != nil {
			t.Skip("no /proc here")
		}
		_, err := pebble.Open("/proc", pebble.WithLogger(quiet))
		require.ErrorContains(t, err, "storage/pebble: open /proc: the data directory cannot be written")
	})
	t.Run("SameProcess", func(t *testing.T) {
		dir := t.TempDir()
		openDB(t, dir)
		_, err := pebble.Open(dir, pebble.WithLogger(quiet))
		require.ErrorIs(t, err, pebble.ErrLocked)
		require.ErrorContains(t, err, "already open in this process")
	})
	t.Run("OtherProcess", func(t *testing.T) {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestOpenErrorTexts$")
		cmd.Env = append(os.Environ(), "WARREN_TEST_HOLD_DB="+dir)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			stdin.Close()
			_ = cmd.Wait()
		})
		line, err := bufio.NewReader(stdout).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "open\n", line)

		_, err = pebble.Open(dir, pebble.WithLogger(quiet))
		require.ErrorIs(t, err, pebble.ErrLocked)
		require.ErrorContains(t, err, "locked by another process")
	})
}
