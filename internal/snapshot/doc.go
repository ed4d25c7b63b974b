// Package snapshot reads the broker's vhosts, queues and connections as the
// introspection API and the management API show them: one reader, so the
// two agree on what a queue's counts are and on how they are learnt.
//
// It promises that no read here starts an idle queue's actor unless the
// caller asks for exact counts (Usage with exact set): a listing of 100,000
// idle queues reads what each published when it went idle (SampledUsage).
// Each snapshot is exact when taken; a listing as a whole is not one
// instant while clients are active.
package snapshot
