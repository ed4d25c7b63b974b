package events

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's test run if any goroutine is still running
// after every test finished: a subscription must start none of its own.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
