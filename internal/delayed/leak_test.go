package delayed

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's test run if any goroutine is still running
// after every test finished: whoever starts a goroutine must stop it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
