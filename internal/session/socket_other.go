//go:build !linux

package session

import "io"

// wrapSocket leaves rwc as it is: the raw-syscall socket of socket_linux.go
// is Linux only.
func wrapSocket(rwc io.ReadWriteCloser) io.ReadWriteCloser { return rwc }
