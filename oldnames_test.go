package broker

import (
	"net/http"
	"testing"

	"github.com/warrenmq/broker/internal/metrics/promtest"
)

// promFamily and scrape are the names mgmt_direct_test.go still calls;
// the parser is internal/metrics/promtest's. Delete this file with
// oldnames.go when the management tests move.
type promFamily struct{ samples map[string]float64 }

func scrape(t *testing.T, h http.Handler) map[string]*promFamily {
	t.Helper()
	out := map[string]*promFamily{}
	for name, f := range promtest.Scrape(t, h) {
		out[name] = &promFamily{samples: f.Samples}
	}
	return out
}
