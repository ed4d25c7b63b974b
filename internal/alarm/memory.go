package alarm

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// assumedTotalMemory is what the default watermark is a share of when the
// machine's memory cannot be read (not Linux): RabbitMQ assumes 1 GiB too.
const assumedTotalMemory = 1 << 30

// TotalMemory is the memory the process may use: the machine's (Linux
// /proc/meminfo), or the cgroup's limit when lower, as RabbitMQ's
// vm_memory_monitor reads it; 1 GiB when neither is readable.
func TotalMemory() int64 {
	total := int64(0)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		total = parseMemTotal(b)
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge number (v1) mean no limit.
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	if total <= 0 {
		return assumedTotalMemory
	}
	return total
}

// parseMemTotal reads "MemTotal: N kB" from /proc/meminfo; 0 if absent.
func parseMemTotal(meminfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || n <= 0 {
				return 0
			}
			if len(f) >= 3 && f[2] == "kB" {
				n *= 1024
			}
			return n
		}
	}
	return 0
}
