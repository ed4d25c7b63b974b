//go:build !linux

package pebble

import "errors"

// allocate is not available here: createReserve writes zeros instead.
func allocate(uintptr, int64) error { return errors.ErrUnsupported }
