//go:build race

package broker_test

// raceEnabled: the test binary runs under the race detector, which grows
// every goroutine's stack and every allocation, so memory budgets do not
// apply.
const raceEnabled = true
