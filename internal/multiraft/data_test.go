package multiraft

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// FuzzDecodeApplied decodes arbitrary bytes as a group's applied record
// (a damaged database): it refuses or accepts, never panics, and what it
// accepts encodes to a record that decodes the same.
func FuzzDecodeApplied(f *testing.F) {
	v, err := encodeApplied(appliedRecord{index: 12, term: 3, conf: &raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}})
	require.NoError(f, err)
	f.Add(v)
	f.Add(make([]byte, 16))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeApplied(b)
		if err != nil {
			return
		}
		v, err := encodeApplied(r)
		require.NoError(t, err)
		again, err := decodeApplied(v)
		require.NoError(t, err)
		require.Equal(t, r.index, again.index)
		require.Equal(t, r.term, again.term)
		require.True(t, proto.Equal(raftpb.EnsureConfState(r.conf), raftpb.EnsureConfState(again.conf)))
	})
}
