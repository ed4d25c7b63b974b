// Package measure reads what the tests and benchmarks that check memory and
// cost assert on: the live heap through runtime/metrics, and the process's
// CPU time. Wall time is no measure on a machine other work shares.
package measure
