package alarm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/session"
)

// TestAlarmSessionMapping: each Kind, and their union, maps to the
// session.Alarms bit that blocks connections for it and back unchanged, and
// a bit neither side knows is dropped rather than raising some other alarm.
func TestAlarmSessionMapping(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		bits uint32
	}{
		{0, 0},
		{Memory, session.AlarmMemory},
		{Disk, session.AlarmDisk},
		{Memory | Disk, session.AlarmMemory | session.AlarmDisk},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			require.Equal(t, tc.bits, gateBits(tc.kind))
			require.Equal(t, tc.kind, ofGate(tc.bits))
			require.Equal(t, tc.kind, ofGate(gateBits(tc.kind)))
		})
	}
	require.Equal(t, uint32(0), gateBits(Kind(1<<7)))
	require.Equal(t, Kind(0), ofGate(1<<31))
	require.Equal(t, All, ofGate(^uint32(0)))
}

func TestParseMemTotal(t *testing.T) {
	for in, want := range map[string]int64{
		"MemTotal:       16314160 kB\nMemFree: 1 kB\n": 16314160 << 10,
		"MemFree: 1 kB\n":     0,
		"MemTotal: lots kB\n": 0,
		"":                    0,
	} {
		require.Equal(t, want, parseMemTotal([]byte(in)), "%q", in)
	}
	require.Positive(t, TotalMemory())
}
