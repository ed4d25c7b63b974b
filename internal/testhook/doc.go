// Package testhook is how package brokertest reaches what the broker does
// on purpose not export: operations that only a test should call, kept off
// Broker's public method set. The root package fills the hooks in when it
// is initialised, so a hook is never nil in a program that links the
// broker; brokertest calls them.
//
// A hook takes the broker as any (a *broker.Broker): this package cannot
// name the root's types, which import it.
package testhook
