//go:build !linux

package transport

import "io"

// wrapSocket leaves rwc as it is: the raw-syscall socket of socket_linux.go
// is Linux only.
func wrapSocket(rwc io.ReadWriteCloser) io.ReadWriteCloser { return rwc }

// watchHangup cannot watch a socket without reading it here: hungUp is nil
// and never fires (see socket_linux.go).
func watchHangup(rwc io.ReadWriteCloser) (hungUp <-chan struct{}, stop func()) {
	return nil, func() {}
}
