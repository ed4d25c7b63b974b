// Package capability finds the stores a wrapper embeds, for the optional
// interface checks of packages meta, storage and unacked (their
// Capabilities lists): a wrapper written by embedding a store interface
// in a struct forwards the interface's methods only, so the optional
// interfaces of the store it embeds are hidden from type assertions.
// Embedded finds those stores so the checks can name what is hidden.
// Capability, Lacks, Hidden and Pick are the rest of what the three
// packages share: each lists its Capabilities and writes only its own Wrap
// (the struct per combination of interfaces, which needs its types).
//
// It promises: only anonymous (embedded), readable fields whose type is exactly the
// store interface are followed, through structs and pointers to them, at
// any depth, each value once; a store held in a named field is the
// wrapper's own business and is not looked at. It never panics on any
// value.
package capability
