package raft_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta/raft"
)

// TestLoadSecret: a founding member's first start writes a secret, owner
// only, and reads the same one after; a joining member or a directory
// with raft state but no secret is refused; a short file is refused.
func TestLoadSecret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "member")
	s, generated, err := raft.LoadSecret(dir, false)
	require.NoError(t, err)
	require.True(t, generated)
	require.Len(t, s, 43, "32 random bytes, base64url")
	fi, err := os.Stat(filepath.Join(dir, raft.SecretFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	again, generated, err := raft.LoadSecret(dir, true)
	require.NoError(t, err)
	require.False(t, generated)
	require.Equal(t, s, again)
	fromFile, err := raft.ReadSecretFile(filepath.Join(dir, raft.SecretFile))
	require.NoError(t, err)
	require.Equal(t, s, fromFile)

	_, _, err = raft.LoadSecret(filepath.Join(t.TempDir(), "joiner"), true)
	require.ErrorIs(t, err, raft.ErrNoSecret)

	old := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(old, "log"), 0o755))
	_, _, err = raft.LoadSecret(old, false)
	require.ErrorIs(t, err, raft.ErrNoSecret)
	require.NoFileExists(t, filepath.Join(old, raft.SecretFile))

	short := filepath.Join(t.TempDir(), "short")
	require.NoError(t, os.WriteFile(short, []byte("  too short \n"), 0o600))
	_, err = raft.ReadSecretFile(short)
	require.ErrorContains(t, err, "fewer than 16")
}
