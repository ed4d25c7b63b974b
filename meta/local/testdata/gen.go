//go:build ignore

// gen writes the data directory v1 (meta/local's tests open a copy of it)
// and records.txt, its metadata keys and values: run at the commit named
// in README, with `go run gen.go` in this directory. Do not run it again:
// the directory holds what that version wrote.
package main

import (
	"context"
	"fmt"
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
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte("m"), UpperBound: []byte("n")})
	if err != nil {
		log.Fatal(err)
	}
	out, err := os.Create("records.txt")
	if err != nil {
		log.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		fmt.Fprintf(out, "%q\t%q\n", it.Key(), it.Value())
	}
	if err := it.Close(); err != nil {
		log.Fatal(err)
	}
	if err := out.Close(); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
}
