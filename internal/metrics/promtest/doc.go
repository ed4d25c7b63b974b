// Package promtest parses the Prometheus text exposition format (0.0.4)
// strictly, for the tests of the metrics handler and of whatever serves
// it: it rejects what a lenient scraper would let pass, so a test catches
// sloppy output.
package promtest
