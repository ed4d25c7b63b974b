// Command server is the old name of cmd/warren, kept so that
// `go run ./examples/server` and the scripts that build it keep working:
// it takes the same flags and does the same (see cmd/warren).
package main

import "github.com/warrenmq/broker/internal/server"

func main() { server.Main() }
