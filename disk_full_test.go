package broker

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/alarm"
	"github.com/warrenmq/broker/internal/amqptest"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts
// it on cleanup. It needs root (and mount(8)); the test is skipped, saying
// why, otherwise.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (run the tests as root to fill a real file system)")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			// Lazily, so a file left open does not leak the mount.
			_ = exec.Command("umount", "-l", dir).Run()
			t.Logf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file into dir until the file system refuses more and
// returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "filling the disk: %v", err)
			break
		}
	}
	// The last partial chunk may not have reached the page cache's end.
	for _, n := range []int{4096, 512, 1} {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// TestDiskFull fills a 64 MiB file system with persistent messages: the
// disk alarm goes up and blocks the publisher before the disk refuses
// Pebble a write (which used to panic the broker), and no confirmed message
// is lost. Then the file system is filled to the last byte and the broker
// restarted on it: it starts (it used to never listen), raises the disk
// alarm, serves the consumer that drains the queue, and the alarm clears
// as Pebble gives the drained messages' space back.
func TestDiskFull(t *testing.T) {
	dir := mountTmpfs(t, 64<<20)
	opts := Options{DataDir: dir, DiskFreeLimit: 4 << 20, MemoryHighWatermark: -1}

	b := startBroker(t, opts)
	conn, blocked := dialPublisher(t, b)
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "q", true)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1024))

	// A publisher that keeps a window of unconfirmed messages, as a
	// well-behaved one does, until it is blocked.
	const window = 64
	body := make([]byte, 16<<10)
	_, _ = crand.Read(body)    // incompressible, or Pebble's compression hides the size
	acked := map[uint64]bool{} // delivery tag = message number + 1
	published, outstanding := 0, 0
	// Until blocked by an alarm that stays: a batch refused for want of
	// space raises it too, and it clears at the next sample when the disk
	// still has room by the alarm's measure.
	isBlocked := false
	for !isBlocked || !slices.Contains(b.Alarms(), AlarmDisk) {
		for !isBlocked && outstanding < window {
			copy(body, fmt.Sprintf("%08d", published))
			require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false,
				amqp091.Publishing{Body: body, DeliveryMode: amqp091.Persistent}))
			published++
			outstanding++
		}
		select {
		case c := <-confirms:
			outstanding--
			if c.Ack {
				acked[c.DeliveryTag] = true
			}
		case bl := <-blocked:
			if bl.Active {
				require.Equal(t, "low on disk", bl.Reason)
			}
			isBlocked = bl.Active
		case <-time.After(amqptest.Timeout):
			t.Fatalf("neither blocked nor confirmed after %d publishes", published)
		}
	}
	// What was read before the block is confirmed (or nacked) still.
	deadline := time.After(time.Second)
drain:
	for {
		select {
		case c := <-confirms:
			if c.Ack {
				acked[c.DeliveryTag] = true
			}
		case <-deadline:
			break drain
		}
	}
	require.NotEmpty(t, acked)
	t.Logf("published %d, confirmed %d before the disk alarm blocked the publisher", published, len(acked))
	require.NoError(t, b.Close())

	// Restart on a file system without a free byte: Pebble must write to
	// open (a new WAL and MANIFEST, the flush of the old WAL).
	fillDisk(t, dir)
	b = startBroker(t, opts)
	// Opening gave back space (the old WALs, flushed). Take it too, as
	// another program on the disk would, but for the reserve and Pebble's
	// headroom: the disk is full by the alarm's measure, and the broker
	// has what it needs to serve consumers.
	filler := fillDisk(t, dir)
	st, err := os.Stat(filler)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(filler, st.Size()-b.stores.Reserve.Target()-b.alarm.DiskHeadroom()))
	require.Eventually(t, func() bool { return fmt.Sprint(b.Alarms()) == fmt.Sprint([]Alarm{AlarmDisk}) },
		amqptest.Timeout, time.Millisecond, "the disk alarm on a full disk")

	consumer := amqptest.Dial(t, b.URL(), amqp091.Config{})
	cch := amqptest.Channel(t, consumer)
	require.NoError(t, cch.Qos(100, 0, false))
	msgs, err := cch.Consume("q", "", false, false, false, false, nil)
	require.NoError(t, err)
	got := map[uint64]bool{}
	for {
		var d amqp091.Delivery
		if len(got) < len(acked) {
			d = amqptest.Next(t, msgs)
		} else {
			// Messages nacked at the publisher may have been stored too.
			select {
			case d = <-msgs:
			case <-time.After(500 * time.Millisecond):
			}
		}
		if d.Body == nil {
			break
		}
		var n uint64
		_, err := fmt.Sscanf(string(d.Body[:8]), "%d", &n)
		require.NoError(t, err)
		got[n+1] = true
		require.NoError(t, d.Ack(false))
	}
	for tag := range acked {
		require.True(t, got[tag], "confirmed message %d lost", tag-1)
	}
	require.Eventually(t, func() bool { return len(b.Alarms()) == 0 }, 2*amqptest.Timeout, 10*time.Millisecond,
		"the disk alarm clears once the queue is drained")
}

// TestDiskAlarmAtStart: a broker started on a disk below its limit has the
// alarm up when New returns, before it can read a single publish (the
// first sample used to be taken by the monitor goroutine, later).
func TestDiskAlarmAtStart(t *testing.T) {
	statfs := func(string) (int64, error) { return 0, nil }
	b, err := New(Options{DataDir: t.TempDir(), MemoryHighWatermark: -1,
		alarmPolling: alarm.Polling{Disk: time.Hour, Statfs: statfs}})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, []Alarm{AlarmDisk}, b.Alarms())
}
