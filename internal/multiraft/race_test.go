//go:build race

package multiraft

// raceEnabled: the test binary runs under the race detector, whose cost
// makes CPU figures meaningless.
const raceEnabled = true
