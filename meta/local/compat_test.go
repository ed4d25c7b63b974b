package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/metatest"
)

// TestReadsDataWrittenBefore opens a copy of testdata/v1, a data
// directory an earlier version wrote (testdata/gen.go, at the commit
// testdata/README names): every entity reads back as it was written.
func TestReadsDataWrittenBefore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v1")
	require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/v1")))
	db := openDB(t, dir, vfs.Default)
	require.Equal(t, metatest.SampleRecords(t, "testdata/records.txt"), metadata(t, db), "the records as stored")
	metatest.CheckSample(t, newStore(t, db))
}

// TestWritesWhatItWroteBefore writes the sample into a new store: the
// records are, byte for byte, those the earlier version wrote.
func TestWritesWhatItWroteBefore(t *testing.T) {
	db := openDB(t, t.TempDir(), vfs.Default)
	require.NoError(t, metatest.WriteSample(context.Background(), newStore(t, db)))
	require.Equal(t, metatest.SampleRecords(t, "testdata/records.txt"), metadata(t, db))
}

// metadata returns every record under the store's 'm' prefix, in key
// order.
func metadata(t *testing.T, db *pebble.DB) []meta.Record {
	t.Helper()
	recs, err := metatest.Records(db)
	require.NoError(t, err)
	return recs
}
