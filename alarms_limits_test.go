package broker

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/alarm"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/queue"
)

// TestSetAlarmLimits: lowering the memory watermark of a running broker
// below what its queue holds raises the memory alarm at the next sample,
// raising it again clears it, and turning it off clears it too; the disk
// limit does the same against the free space the monitor reads; the
// management view (alarmStatus) shows the limits in force. A check off
// at start cannot be turned on.
func TestSetAlarmLimits(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 30)
	b := startBroker(t, Options{DataDir: t.TempDir(), MemoryHighWatermark: 1 << 30, DiskFreeLimit: 1000,
		alarmPolling: alarm.Polling{Memory: 5 * time.Millisecond, Disk: 5 * time.Millisecond, Statfs: func(string) (int64, error) { return free.Load(), nil }}})
	conn, _ := dialPublisher(t, b)
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "q", false)
	amqptest.PublishBodies(t, ch, "q", false, string(make([]byte, 64<<10)))
	waitStats(t, b, "q", func(st queue.Stats) bool { return st.Ready == 1 })
	alarms := func(want ...Alarm) {
		t.Helper()
		if want == nil {
			want = []Alarm{}
		}
		require.Eventually(t, func() bool { return len(b.Alarms()) == len(want) && (len(want) == 0 || b.Alarms()[0] == want[0]) },
			amqptest.Timeout, time.Millisecond, "want alarms %v, have %v", want, b.Alarms())
	}
	alarms()

	require.NoError(t, b.SetAlarmLimits(1024, 1000))
	alarms(AlarmMemory)
	require.Equal(t, int64(1024), b.alarmStatus().MemLimit)
	require.NoError(t, b.SetAlarmLimits(1<<30, 1000))
	alarms()
	require.NoError(t, b.SetAlarmLimits(1024, 1000))
	alarms(AlarmMemory)
	require.NoError(t, b.SetAlarmLimits(-1, 1000))
	alarms()
	require.Zero(t, b.alarmStatus().MemLimit, "off")

	require.NoError(t, b.SetAlarmLimits(-1, 2<<30))
	alarms(AlarmDisk)
	require.Equal(t, int64(2<<30), b.alarmStatus().DiskFreeLimit)
	require.NoError(t, b.SetAlarmLimits(-1, 0))
	alarms()
	require.Equal(t, int64(DefaultDiskFreeLimit), b.alarmStatus().DiskFreeLimit, "0 is the default")

	off := startBroker(t, Options{MemoryHighWatermark: -1})
	require.ErrorContains(t, off.SetAlarmLimits(1024, 0), "needs a restart")
	require.NoError(t, off.SetAlarmLimits(-1, 1<<40), "no DataDir: the disk limit means nothing, as in Options")
}
