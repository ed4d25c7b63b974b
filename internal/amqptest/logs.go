package amqptest

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that many goroutines may write at once: a
// slog handler's output, or a server's log kept to print when a test
// fails.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
