package mgmt

// Names the external tests (package mgmt_test) need from inside.

// MaxBody is the bound of an object's request body.
const MaxBody = mgmtMaxBody

// GetResult is one message of a get's answer without its payload.
type GetResult = getResult

// NewConnGrace is how long an accepted connection may stay silent
// before it counts as idle.
const NewConnGrace = newConnGrace
