// Package packaging holds what installs Warren's server as a service: the
// systemd unit warren.service here and the Dockerfile at the repository
// root, and the tests that check them without systemd or a Docker
// daemon: the Dockerfile parses, the go build it runs builds the binary
// it copies, that binary accepts the image's environment and the unit's
// command line. The package has no code a program imports.
package packaging
