package queue

import (
	"flag"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's test run if any goroutine is still running
// after every test finished: whoever starts a goroutine must stop it.
//
// The tests run with a short idleAfter (WARREN_QUEUE_IDLE_AFTER, 1ms
// unless set), so actors exit and start again all through them: every
// test also checks that an actor that went idle comes back for whatever
// wakes it (ops, Kicks, timers, stop). Benchmarks keep the real one.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		idleAfter = time.Millisecond
		if d, err := time.ParseDuration(os.Getenv("WARREN_QUEUE_IDLE_AFTER")); err == nil {
			idleAfter = d
		}
	}
	goleak.VerifyTestMain(m)
}
