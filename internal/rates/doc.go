// Package rates keeps a short history of the broker's counters, from
// which the management API computes RabbitMQ's "*_details" objects: a
// rate per second for every counter and gauge, and, for the objects a
// client asks history of, the samples over the last minutes.
//
// A Recorder is fed by one sampler (the root package's, every Interval):
// Record stores an object's values at that instant, EndRound forgets the
// objects that were not recorded in the last round (deleted queues,
// closed connections). Every object keeps its two newest samples, enough
// for a rate; a full history of Keep samples is kept only for pinned
// objects (the broker's totals, the vhosts) and for at most Watch others
// that a client asked history of (Details with an age), each until
// WatchFor passes without another such request. So memory is bounded
// whatever the number of queues: about 500 bytes per queue
// (BenchmarkHeapPerObject) plus
// Keep × fields × 8 bytes per pinned or watched one.
//
// Rates follow RabbitMQ's management plugin: a rate is the change between
// the two newest samples divided by the time between them; samples are
// listed newest first as {"sample", "timestamp"} with timestamps in
// milliseconds; avg_rate is the change over the listed samples divided by
// their time span, avg the mean of their values.
//
// A Recorder is safe for concurrent use: the sampler records while
// requests read.
package rates
