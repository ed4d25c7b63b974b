package pebble

import "syscall"

// allocate gives the file behind fd size bytes of disk at once, without
// writing them (fallocate mode 0: the blocks count as used).
func allocate(fd uintptr, size int64) error {
	return syscall.Fallocate(int(fd), 0, 0, size)
}
