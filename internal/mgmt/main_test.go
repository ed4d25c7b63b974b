package mgmt_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine outlives the tests (brokers,
// connections, HTTP servers): whoever starts one stops it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
