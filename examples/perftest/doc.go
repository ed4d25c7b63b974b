// Command perftest measures an AMQP 0-9-1 broker the way RabbitMQ's PerfTest
// does, against any broker URL or against a Warren in this process, and
// checks that every message arrived exactly once.
//
//	go run ./examples/perftest -scenario transient -size 12
//	go run ./examples/perftest -inprocess -scenario fanout -cpuprofile cpu.out
//	go run ./examples/perftest -url amqp://guest:guest@127.0.0.1:5672/ -broker-pid 1234 -json
//	go run ./examples/perftest -table results.jsonl   # markdown from -json lines
//
// Scenarios (-scenario):
//
//	transient           1 publisher, 1 auto-ack consumer, non-durable queue
//	persistent-confirm  durable queue, delivery mode 2, confirm window 256,
//	                    manual ack with prefetch 100
//	latency             transient at a fixed 1,000 msg/s: end-to-end p50/p95/p99/max
//	fanout              1 publisher, fanout exchange to 8 queues, 8 consumers
//	get                 drain 20,000 messages with basic.get + ack
//	many-queues         50 connections with a queue each, 100 msg/s each
//	scale               how cost grows (scale.go): -phases fill,restart,drain,
//	                    queues,connections; -count messages in one queue,
//	                    -queues durable queues, -connections idle ones; one
//	                    result (scale-PHASE) per step
//
// Against a cluster, -url takes the members' URLs separated by commas and
// -broker-pid their pids: queue i is declared, published and consumed on
// URL i mod their count, as a load balancer in front of the cluster would
// spread its clients, and broker CPU is the members' sum. -keep leaves the
// run's queues declared afterwards, to see what they still hold.
//
// Every publisher and consumer has its own connection (as in PerfTest),
// except many-queues, where each connection carries one publisher and the
// consumer of its queue. Message bodies start with a 4-byte sequence number
// and an 8-byte send time, so -size is at least 12.
//
// What is measured: publishing runs for -duration; then the run waits until
// every published message has been consumed and every confirm has arrived,
// giving up after -drain-timeout without progress. Rates divide each count by
// the time from the first publish to the last event of its kind. A run is
// verified when every queue saw every sequence number of its publisher
// exactly once and every confirm was an ack; otherwise perftest exits 1.
// "lost" counts the numbers never seen; "lost_confirmed" those of them the
// broker had confirmed, the loss that breaks a promise: after a broker
// closes a publisher's channel (541: outcome unknown), what it had not
// confirmed may or may not arrive, and the run waits only for what was
// confirmed.
// Latency is receive time minus the send time in the body (for get: the
// basic.get round trip), from a histogram accurate to 1.6 %.
//
// Back-pressure: a publisher never has more than -inflight messages per
// queue published but not yet consumed, nor more than the confirm window
// unconfirmed, so a fast publisher cannot bury the consumer and the figures
// are sustained rates, not the speed of filling memory.
//
// Broker CPU and RSS: with -broker-pid, utime+stime from /proc/PID/stat and
// VmRSS/VmHWM from /proc/PID/status. In-process (-inprocess) the broker and
// the client share this process and cannot be told apart: the CPU and RSS
// reported are the whole process's, broker plus client. CPU per message is
// per delivery (a fanout message counts once per queue).
//
// -inprocess (or -inprocess=dial) starts Warren in this process and reaches
// it through Broker.Dial, the socket-free door: the whole wire protocol,
// no TCP. -inprocess=tcp serves it on a loopback port instead, which is the
// way to profile the broker's socket path. -inprocess=direct drives the same
// scenarios through the direct API (broker.Channel), one broker.Channel per
// connection above: no frames, no socket, no client library.
//
// -client raw replaces amqp091-go for the transient and fanout scenarios
// (raw.go) with a client that costs almost nothing, so the broker is
// measured at its own ceiling: the publisher writes 256 pre-encoded
// basic.publish frames per Write, patching only each body's sequence number
// and send time; each consumer consumes with no-ack and reads frame headers
// off the socket, looking only at basic.deliver and the first 12 bytes of
// the body after it. It dials -url or the -inprocess=tcp listener over plain
// TCP, asks for no heartbeats, and publishes in whole batches of 256. The
// result says "client": "raw"; client CPU per message (getrusage of this
// process) is reported for both clients.
//
// Scale (-scenario scale) measures steps rather than a stream: fill one
// durable queue with -count persistent messages with confirms (rate, peak
// RSS, memory per queued message), restart the broker and time the first
// delivery from the broker's start, drain the queue with -prefetch and an
// ack per message (rate overall and per tenth, RSS and the data
// directory's size, -du, per tenth), declare and bind -queues durable
// queues, publish one message to each, delete them, and hold -connections
// idle connections with a channel. Memory per item is the broker's RSS
// growth, read after -settle, divided among the items. In process the
// restart reopens the broker on its -data directory; against -url it is
// the caller's (scripts/compare.sh scale runs -phases fill, restarts the
// broker, then -phases drain with -broker-pid, whose start time comes
// from /proc).
//
// Inside, each publisher, each consumer and each confirm listener is its own
// goroutine; a consumer owns its verifier and latency histogram, and the
// counters the drain loop reads are atomics. Every goroutine a run starts has
// exited, and every queue and exchange it declared has been deleted, before
// the run returns.
package main
