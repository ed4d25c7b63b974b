package raft

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// SecretFile is the name of the cluster secret in a member's directory
// (Config.Dir): the file LoadSecret reads, and writes on a member's first
// start.
const SecretFile = "cluster-secret"

// minSecretBytes is the shortest secret TCPConfig takes: 128 bits.
const minSecretBytes = 16

// ErrNoSecret is returned by LoadSecret for a member that has no cluster
// secret and must not make one up: one that joins an existing cluster, or
// whose directory already holds raft state (its cluster's other members
// have theirs).
var ErrNoSecret = errors.New("raft: no cluster secret")

// LoadSecret returns the cluster secret of the member whose directory is
// dir: the contents of dir/SecretFile. On a member's first start (dir
// holds no raft state yet) without one, and when join is false (it founds
// a cluster), it generates one (32 random bytes, base64url) and writes it
// there, readable by its owner only; generated then says so, and every
// other member must be given the same secret: copy the file into their
// directories, or pass it to them as TCPConfig.Secret. A member that
// joins (join true), or whose directory holds raft state from before it
// had a secret, gets ErrNoSecret instead: a secret of its own would shut
// it out of its cluster.
func LoadSecret(dir string, join bool) (secret []byte, generated bool, err error) {
	path := filepath.Join(dir, SecretFile)
	secret, err = ReadSecretFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return secret, false, err
	}
	switch _, serr := os.Stat(filepath.Join(dir, "log")); {
	case join:
		return nil, false, fmt.Errorf("%w in %s: a member that joins a cluster needs that cluster's secret: copy %s from a member's directory", ErrNoSecret, dir, SecretFile)
	case serr == nil:
		return nil, false, fmt.Errorf("%w in %s, which holds raft state: give this member its cluster's secret (copy %s from another member's directory)", ErrNoSecret, dir, SecretFile)
	case !errors.Is(serr, fs.ErrNotExist):
		return nil, false, fmt.Errorf("raft: %w", serr)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, false, fmt.Errorf("raft: generate cluster secret: %w", err)
	}
	secret = []byte(base64.RawURLEncoding.EncodeToString(raw))
	if err := writeSecret(dir, path, secret); err != nil {
		return nil, false, err
	}
	return secret, true, nil
}

// ReadSecretFile reads a cluster secret from path: the file's contents
// without surrounding white space, at least 16 bytes.
func ReadSecretFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("raft: read cluster secret: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < minSecretBytes {
		return nil, fmt.Errorf("raft: cluster secret %s has %d bytes, fewer than %d", path, len(b), minSecretBytes)
	}
	return b, nil
}

// writeSecret writes secret to path in dir atomically (a temporary file,
// synced, renamed, the directory synced), so a crash leaves the old state
// or the whole secret.
func writeSecret(dir, path string, secret []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("raft: create data dir: %w", err)
	}
	f, err := os.CreateTemp(dir, SecretFile+".*")
	if err != nil {
		return fmt.Errorf("raft: write cluster secret: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails once renamed
	_, err = f.Write(append(secret, '\n'))
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(dir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("raft: write cluster secret: %w", err)
	}
	return nil
}
