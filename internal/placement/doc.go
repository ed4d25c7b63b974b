// Package placement runs a named link (a shovel, a federation link) on
// exactly one of the brokers that share one replicated store (a cluster's
// meta/raft group), and moves it to another when that broker dies.
//
// A Lease keeps, per link name, one record in the store (meta.Records,
// first byte 'p') naming its holder: the member and an incarnation
// nonce, and a generation that every renewal increments. Run acquires
// the record with a conditional update (it must still hold the value
// this member last read, or be absent), runs the link while it holds it,
// renews it every TTL/6 with another conditional update, and deletes it
// when the link ends or the member stops, so another member takes over
// at once. Nothing here needs synchronised clocks: each member measures
// durations with its own monotonic clock.
//
// What it promises (fencing): a member that cannot renew stops its link
// StopAfter (TTL/3) after the start of its last successful renewal,
// and waits for the link to return before it tries again; another member
// takes the record only after it has seen the same value unchanged for a
// whole TTL on its own clock, and only with an update conditional on that
// value. Since a value is committed after its renewal started, the old
// holder's link has been told to stop two thirds of a TTL before any
// other member can start it: no link runs on two members at once as long
// as a member's link returns within that margin and the members' clocks
// run at about the same rate (the assumptions of every lease). When the
// holder dies, its link runs again elsewhere within about TTL plus one
// poll. A member that restarts has a new nonce, so it waits like any
// other.
//
// Restart (restart.go) restarts a held link from any member: a request
// counter beside the lease, which the holder reads before each renewal
// and serves by stopping and starting its link under the same lease,
// saying so in its status record; the caller returns once it has.
//
// Why a lease in the store and not "the raft leader runs every link":
// leadership in etcd-raft is not fenced in time (a deposed leader learns
// it at its next CheckQuorum round, while the others may already have
// elected a new one), so leader-run links would need a lease anyway;
// and a lease per link spreads links over the members instead of piling
// them on the leader.
package placement
