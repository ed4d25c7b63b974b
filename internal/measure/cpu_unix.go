//go:build unix

package measure

import (
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time the process has used (user and system),
// so a benchmark can report what an op costs on a machine that other work
// shares, where wall time mostly measures the wait for a core.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
