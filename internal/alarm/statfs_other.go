//go:build !(linux || darwin || freebsd)

package alarm

import (
	"errors"
	"runtime"
)

// statfsFree is not implemented here: the disk monitor logs it once and
// never raises the disk alarm, as RabbitMQ does on platforms it does not
// recognise.
func statfsFree(string) (int64, error) {
	return 0, errors.New("broker: free disk space is not known on " + runtime.GOOS)
}
