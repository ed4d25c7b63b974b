package local_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/metatest"
)

func TestPolicies(t *testing.T) {
	dir := t.TempDir()
	open := func() *pebble.DB {
		db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}})
		require.NoError(t, err)
		return db
	}
	db := open()
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	metatest.RunPolicies(t, newStore(t, db), func() meta.Store {
		require.NoError(t, db.Close())
		db = open()
		return newStore(t, db)
	})
}

// TestParameters: runtime and global parameters survive a reopen.
func TestParameters(t *testing.T) {
	dir := t.TempDir()
	open := func() *pebble.DB {
		db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}})
		require.NoError(t, err)
		return db
	}
	db := open()
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	metatest.RunParameters(t, newStore(t, db), func() meta.Store {
		require.NoError(t, db.Close())
		db = open()
		return newStore(t, db)
	})
}
