// Package events carries what the broker's connections and queues report
// to an embedding program: connections created and closed, consumers
// created and deleted, messages returned, dead-lettered and expired,
// bindings created and deleted (told by the vhosts through the root).
// SubscribeFunc is the broker's own listener (the federation links): a
// function called during Emit, which drops nothing and starts no
// goroutine. The
// root package turns them into broker.Event and hands them out through
// Broker.Events; docs/events.md is the user's guide.
//
// A Hub is the one sink every source shares (session.Config.Events,
// queue.Config.Events). The sources take the concrete *Hub rather than an
// interface, as session's Counters, Alarms and Drain are taken: nil means
// off, and On inlines into each call site as one atomic load, where an
// interface call would not. Its promises:
//
//   - Emit never waits for a subscriber. Each subscription has a buffered
//     channel; when it is full the event is dropped for that subscriber
//     only and counted, and the next event it receives carries the count
//     (Event dropped before it), so a program knows it missed some.
//   - With no subscriber for a kind, On(kind) is one atomic load and the
//     source builds nothing: the call sites test On before they fill an
//     Event.
//   - Events from one goroutine (a queue's actor, a connection's reader)
//     arrive in the order they were emitted; events from different
//     goroutines in no particular order.
//   - A subscription ends when its context ends or the Hub closes: its
//     channel is closed, after which Emit never touches it. No goroutine
//     is started for it (context.AfterFunc runs only once the context is
//     done).
//
// Emit, On, Subscribe and Close are safe from any goroutine; a nil *Hub
// is valid and reports nothing (the session and queue tests run without
// one).
package events
