// Command embedded runs Warren inside the program and uses it through the
// direct API: no socket and no frames, the broker's own session code
// called in-process. It declares a queue, publishes with publisher
// confirms, consumes and acknowledges, then shuts down. A publish the
// broker does not confirm, or any other failed step, ends the program with
// exit status 1 and the error; its test runs the same steps.
//
//	go run ./examples/embedded
package main
