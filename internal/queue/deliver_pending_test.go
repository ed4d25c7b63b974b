package queue

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// TestPendingFits checks the bounds of the records kept in memory ahead
// of the cursor: a backlog of small messages up to maxPending records, one
// of large messages up to about maxPendingBytes, and any batch when
// nothing is pending.
func TestPendingFits(t *testing.T) {
	batch := func(n, size int) []storage.Record {
		recs := make([]storage.Record, n)
		for i := range recs {
			recs[i].Body = bytes.Repeat([]byte("x"), size)
		}
		return recs
	}
	cases := []struct {
		name    string
		pending int // records already pending
		recs    []storage.Record
		fits    bool
	}{
		{"empty", 0, batch(256, 12), true},
		{"small backlog past the old 4096", 10000, batch(256, 12), true},
		{"small at the count bound", maxPending - 256, batch(256, 12), true},
		{"small past the count bound", maxPending - 255, batch(256, 12), false},
		{"1 KiB within the bytes", 3000, batch(256, 1024), true},
		{"1 KiB past the bytes", 4000, batch(256, 1024), false},
		{"64 KiB, a batch past the bytes into an empty pending", 0, batch(100, 64<<10), true},
		{"64 KiB past the bytes", 64, batch(1, 64<<10), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &Queue{pending: make([]storage.Record, c.pending)}
			require.Equal(t, c.fits, q.pendingFits(c.recs))
		})
	}
}
