//go:build !race

package broker_test

// raceEnabled: see race_test.go.
const raceEnabled = false
