package queue

import "github.com/warrenmq/broker/storage"

// Record is a message as Publish takes it and a Message carries it: the
// store's record, named here so that callers of a queue (the session) need
// not import the storage package to publish.
type Record = storage.Record

// ErrOutcomeUnknown is matched (errors.Is) by the error a Confirmer gets
// when the store cannot tell whether a batch was stored (a raft leader
// changed while the append was in flight): neither an ack nor a nack is
// true of it. It is storage.ErrOutcomeUnknown, named here so that a
// Confirmer tells it apart without importing the storage package.
var ErrOutcomeUnknown = storage.ErrOutcomeUnknown
