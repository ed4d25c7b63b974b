// Package cluster runs Warren on a meta/raft group: every node keeps a
// full replica of metadata, durable queues and the unacked index, and the
// raft leader serves AMQP.
//
// This is the first, active/standby form of issue 10's cluster. A Node
// runs one raft member (meta/raft) and a supervisor goroutine that follows
// its leadership: when the member becomes leader, the supervisor starts a
// broker.Broker whose Meta, Shards and Unacked stores are the raft group's
// views and, when Config.Listen is set, serves AMQP there; when the member
// stops leading, it closes that broker (its clients get 320
// CONNECTION_FORCED and reconnect to the new leader). A new leader's broker
// starts the way a restarted broker does: durable topology and messages
// are read from the replicated state, and every delivery that was
// unacknowledged on the old leader comes back in place, redelivered.
//
// What it promises:
//   - a publisher confirm means the message is committed by a quorum and
//     synced on each of its voters, so a confirmed message survives the
//     loss of any minority of nodes, the leader included;
//   - a minority partition has no leader (CheckQuorum, PreVote): the old
//     leader steps down within an election timeout and its publishes are
//     not confirmed, so the two sides never diverge;
//   - delivery is at least once across a failover: a publish whose outcome
//     a dead leader never reported may be stored, and an ack the old leader
//     had not committed is redelivered.
//
// What it does not do yet: followers serve no AMQP (any node serving any
// queue from the shared cursor needs requeue to the shared tail instead of
// the in-process returned set); non-durable queues live on the leader only
// and are lost with it, as RabbitMQ's classic non-durable queues are with
// their node; clients must know every node's address to find the leader.
//
// Leadership is polled (Config.PollInterval), so a new leader serves within
// an election timeout plus one poll.
package cluster
