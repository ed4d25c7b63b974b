package qplace

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine outlives the tests: rebalancers
// and engines stop theirs.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
