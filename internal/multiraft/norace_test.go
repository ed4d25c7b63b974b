//go:build !race

package multiraft

// raceEnabled: see race_test.go.
const raceEnabled = false
