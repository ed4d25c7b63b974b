package storage

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// full implements ShardStore (by embedding, never called) and every
// optional interface.
type full struct{ ShardStore }

func (full) MemoryBytes() int64                                                   { return 0 }
func (full) Sync(context.Context) error                                           { return nil }
func (full) DropTransient(context.Context, string) (int, error)                   { return 0, nil }
func (full) PurgeFrom(context.Context, string, uint64) (n, end uint64, err error) { return 0, 0, nil }

type plain struct{ ShardStore }

// Every combination wrapWith builds implements exactly the optional
// interfaces it was given; Wrap keeps what embedding hides.
func TestWrapCombinations(t *testing.T) {
	var f full
	for mask := range 16 {
		var (
			mr MemoryReporter
			sy Syncer
			td TransientDropper
			pu Purger
		)
		if mask&1 != 0 {
			mr = f
		}
		if mask&2 != 0 {
			sy = f
		}
		if mask&4 != 0 {
			td = f
		}
		if mask&8 != 0 {
			pu = f
		}
		s := wrapWith(plain{}, mr, sy, td, pu)
		for i, c := range Capabilities {
			require.Equal(t, mask>>i&1 != 0, c.Has(s), "mask %b: %s", mask, c.Name)
		}
	}
	require.Equal(t, []string{"storage.MemoryReporter", "storage.Syncer", "storage.TransientDropper", "storage.Purger"}, Hidden(plain{f}))
	require.Empty(t, Hidden(Wrap(plain{f}, f)))
	require.Empty(t, Lacks(Wrap(plain{f}, f)))
	require.Equal(t, ShardStore(plain{}), Wrap(plain{}, plain{}), "nothing to keep: outer as is")
}
