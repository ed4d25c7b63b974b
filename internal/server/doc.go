// Package server is the standalone Warren server behind cmd/warren (and
// the examples/server forwarding main): it reads the flags, starts a
// broker or a cluster member with its listeners and management API, and
// serves until its context is done. Main is the whole of the command's
// main; run is what the tests drive in-process. The command's user
// documentation is cmd/warren's doc comment.
package server
