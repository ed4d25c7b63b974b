// Package params keeps runtime and global parameters (RabbitMQ's
// rabbit_runtime_parameters): the components registered to validate their
// parameters (shovels, federation upstreams), the watchers told of each
// change, and the store reads and writes with RabbitMQ's refusal texts
// ("Validation failed\n\ncomponent X not found\n").
//
// A change made here is told to the component's watchers at once; a
// change another broker made reaches them through Notify, which the
// shared-mode follower calls.
package params
