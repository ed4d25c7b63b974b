package meta

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// full implements Store (by embedding, never called) and every optional
// interface.
type full struct{ Store }

func (full) Watch(func(Change)) func()                                    { return func() {} }
func (full) UpdateRecords(context.Context, RecordUpdate) (bool, error)    { return true, nil }
func (full) ScanRecords(_, _ []byte, _ func(k, v []byte) bool) error      { return nil }
func (full) ReplicationStatus() ReplicationStatus                         { return ReplicationStatus{} }
func (full) QueueReplications(context.Context, string) []QueueReplication { return nil }
func (full) QueueReplication(context.Context, QueueKey) (QueueReplication, bool) {
	return QueueReplication{}, false
}
func (full) Sync(context.Context) error { return nil }

type plain struct{ Store }

// Every combination wrapWith builds implements exactly the optional
// interfaces it was given, and Wrap takes each from outer before inner.
func TestWrapCombinations(t *testing.T) {
	var f full
	for mask := range 16 {
		var (
			cf ChangeFeed
			rs Records
			rp Replicated
			sy Syncer
		)
		if mask&1 != 0 {
			cf = f
		}
		if mask&2 != 0 {
			rs = f
		}
		if mask&4 != 0 {
			rp = f
		}
		if mask&8 != 0 {
			sy = f
		}
		s := wrapWith(plain{}, cf, rs, rp, sy)
		for i, c := range Capabilities {
			require.Equal(t, mask>>i&1 != 0, c.Has(s), "mask %b: %s", mask, c.Name)
		}
	}
	require.Equal(t, []string{"meta.ChangeFeed", "meta.Records", "meta.Replicated", "meta.Syncer"}, Hidden(plain{f}))
	require.Empty(t, Hidden(Wrap(plain{f}, f)))
	require.Empty(t, Lacks(Wrap(plain{f}, f)))
	o := full{}
	require.Equal(t, Store(o), Wrap(o, f), "an outer store that lacks nothing is returned as is")
}
