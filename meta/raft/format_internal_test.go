package raft

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// oldFormatLog writes the log store of a member as the format-1 layout
// left it: no format marker, a HardState and one entry whose append
// command carries a record in the unversioned encoding of that layout
// (lp(exchange) lp(routing key) lp(properties) lp(body) flags priority
// varint(enqueued at) varint(expires at)).
func oldFormatLog(t *testing.T, db *pebble.DB) {
	oldRecord := []byte{1, 'x', 0, 0, 1, 'b', 0, 0, 0, 0}
	var c cmd
	c.ops = appendLPString(append(c.ops, opAppend), "q")
	c.ops = binary.AppendUvarint(c.ops, 1) // record count
	c.ops = appendLP(c.ops, oldRecord)
	c.n = 1
	hs, err := proto.Marshal(&raftpb.HardState{Term: proto.Uint64(2), Vote: proto.Uint64(1), Commit: proto.Uint64(1)})
	require.NoError(t, err)
	require.NoError(t, db.Set(logKeyHardState, hs, pebble.Sync))
	ent, err := proto.Marshal(&raftpb.Entry{Term: proto.Uint64(2), Index: proto.Uint64(1), Data: entryOf(appendCommand(nil, 1, &c))})
	require.NoError(t, err)
	require.NoError(t, db.Set(entryKey(1), ent, pebble.Sync))
}

// TestStartRefusesOtherDataFormat opens data directories written in
// another on-disk format: Start refuses them with ErrDataFormat and leaves
// them as they were, while a new directory is marked with this version's
// format and opens again.
func TestStartRefusesOtherDataFormat(t *testing.T) {
	tests := []struct {
		name  string
		write func(t *testing.T, db *pebble.DB)
		err   string // "" means Start succeeds
	}{
		{"format-1", oldFormatLog, "found format 1"},
		{"later-format", func(t *testing.T, db *pebble.DB) {
			require.NoError(t, db.Set(logKeyFormat, []byte{dataFormat + 1}, pebble.Sync))
		}, "found format 03"},
		{"new", func(*testing.T, *pebble.DB) {}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			logDir := filepath.Join(dir, "log")
			require.NoError(t, os.MkdirAll(logDir, 0o755))
			db, err := pebble.Open(logDir, pebbleOptions(nil))
			require.NoError(t, err)
			tt.write(t, db)
			require.NoError(t, db.Close())

			net := NewNetwork()
			t.Cleanup(net.Close)
			cfg := Config{ID: 1, Dir: dir, Peers: []Peer{{ID: 1}}, Transport: net.Transport(1)}
			n, err := Start(cfg)
			if tt.err != "" {
				require.ErrorIs(t, err, ErrDataFormat)
				require.ErrorContains(t, err, tt.err)
				db, err := pebble.Open(logDir, pebbleOptions(nil))
				require.NoError(t, err)
				defer func() { require.NoError(t, db.Close()) }()
				if tt.name == "format-1" {
					_, _, err := db.Get(logKeyFormat)
					require.ErrorIs(t, err, pebble.ErrNotFound, "a refused directory is left unmarked")
				}
				return
			}
			require.NoError(t, err)
			n.Stop()
			n, err = Start(cfg)
			require.NoError(t, err, "a directory this version marked opens again")
			n.Stop()
		})
	}
}
