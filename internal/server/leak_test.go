package server

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's test run if any goroutine is still running
// after every test finished: whoever starts a goroutine must stop it. A
// test that gives no -data gets the default under a temporary
// XDG_DATA_HOME, not the user's own.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "warren-server-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_DATA_HOME", dir)
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}
