//go:build ignore

// gen writes the data directory v1 (meta/local's tests open a copy of it)
// and records.txt, its metadata keys and values: run at the commit named
// in README, with `go run gen.go` in this directory. Do not run it again:
// the directory holds what that version wrote.
package main

import (
	"context"
	"errors"
	"log"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/meta/local"
	"github.com/warrenmq/broker/meta/metatest"
)

func main() {
	db, err := pebble.Open("v1", &pebble.Options{})
	if err != nil {
		log.Fatal(err)
	}
	s, err := local.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := metatest.WriteSample(context.Background(), s); err != nil {
		log.Fatal(err)
	}
	if err := errors.Join(metatest.WriteRecords("records.txt", db), db.Close()); err != nil {
		log.Fatal(err)
	}
}
