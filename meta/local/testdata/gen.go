//go:build ignore

// gen writes the data directory v1 (meta/local's tests open a copy of it)
// and records.txt, its metadata keys and values: run at the commit named
// in README, with `go run gen.go` in this directory. Do not run it again:
// the directory holds what that version wrote.
package main

import (
	"context"
	"log"
	"os"

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
	recs, err := metatest.Records(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("records.txt", metatest.FormatRecords(recs), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
}
