//go:build ignore

// gen writes the data directory v1 of a one-member group (meta/raft's
// tests open a copy of it) and records.txt, the metadata keys and values
// of its state: run at the commit named in README, with `go run gen.go`
// in this directory. Do not run it again: the directory holds the log
// that version wrote.
package main

import (
	"context"
	"errors"
	"log"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/meta/metatest"
	"github.com/warrenmq/broker/meta/raft"
)

func main() {
	ctx := context.Background()
	net := raft.NewNetwork()
	defer net.Close()
	n, err := raft.Start(raft.Config{ID: 1, Dir: "v1", Peers: []raft.Peer{{ID: 1}}, Transport: net.Transport(1)})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := n.WaitLeader(ctx); err != nil {
		log.Fatal(err)
	}
	if err := metatest.WriteSample(ctx, n); err != nil {
		log.Fatal(err)
	}
	if err := n.Stop(); err != nil {
		log.Fatal(err)
	}
	db, err := pebble.Open(filepath.Join("v1", "state"), &pebble.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := errors.Join(metatest.WriteRecords("records.txt", db), db.Close()); err != nil {
		log.Fatal(err)
	}
}
