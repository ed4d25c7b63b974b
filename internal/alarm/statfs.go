//go:build linux || darwin || freebsd

package alarm

import (
	"fmt"
	"syscall"
)

// statfsFree returns the bytes available to an unprivileged user on the
// file system holding path (RabbitMQ's disk monitor reads the same).
func statfsFree(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("broker: statfs %s: %w", path, err)
	}
	return int64(uint64(st.Bavail) * uint64(st.Bsize)), nil
}
