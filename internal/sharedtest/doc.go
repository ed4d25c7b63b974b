// Package sharedtest is an in-process stand-in for a cluster's replicated
// store: one set of in-memory stores (meta, shards, unacked index) that
// several brokers or queue actors share, with the two optional contracts
// of shared mode, meta.ChangeFeed and unacked.Claimer.
//
// Every write and the delivery of the changes it makes happen under one
// mutex, so changes reach watchers in write order, and a Claim's checks
// and writes are atomic, as a raft state machine applies them. Watchers
// run on the writer's goroutine and must not block or call the stores.
//
// It is for tests of the packages that follow a shared store (the queue
// runtime, the broker); meta/raft is the real implementation.
package sharedtest
