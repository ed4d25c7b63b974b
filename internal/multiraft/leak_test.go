package multiraft

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's test run if any goroutine is still running
// after every test finished: an engine and its transports stop all theirs.
// Pebble's background goroutines end with its Close too.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
