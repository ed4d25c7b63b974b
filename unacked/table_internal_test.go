package unacked

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTableMemoryBounded checks the table's slice follows the live entries,
// not the span of tags, in the patterns that would make it grow: one early
// delivery held while many later ones are acked (in order, or by multiple
// ack), and tags with wide gaps.
func TestTableMemoryBounded(t *testing.T) {
	const n = 100_000
	tests := []struct {
		name   string
		settle func(tbl *Table[int], tag uint64)
		gap    uint64
	}{
		{"take-each", func(tbl *Table[int], tag uint64) { tbl.Take(tag) }, 1},
		{"take-previous", func(tbl *Table[int], tag uint64) {
			if tag > 2 {
				tbl.Take(tag - 1)
			}
		}, 1},
		{"gaps", func(tbl *Table[int], tag uint64) { tbl.Take(tag) }, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tbl Table[int]
			require.NoError(t, tbl.Add(1, 1)) // held throughout
			tag := uint64(1)
			maxLen, maxCap := 0, 0
			for range n {
				tag += tt.gap
				if err := tbl.Add(tag, 0); err != nil {
					require.NoError(t, err)
				}
				tt.settle(&tbl, tag)
				maxLen, maxCap = max(maxLen, tbl.Len()), max(maxCap, cap(tbl.slots))
			}
			require.LessOrEqual(t, maxLen, 2)
			require.LessOrEqual(t, maxCap, 64)
			v, ok := tbl.Take(1)
			require.True(t, ok)
			require.Equal(t, 1, v)
		})
	}
	t.Run("burst-released", func(t *testing.T) {
		var tbl Table[int]
		for tag := uint64(1); tag <= n; tag++ {
			require.NoError(t, tbl.Add(tag, 0))
		}
		require.Equal(t, n, tbl.TakeUpTo(n, nil))
		require.Nil(t, tbl.slots, "an emptied large table lets its memory go")
	})
}
