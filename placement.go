package broker

import (
	"github.com/warrenmq/broker/internal/placement"
	"github.com/warrenmq/broker/meta"
)

// linkPlacer is what runs each shovel and federation link on exactly one
// of the brokers sharing a store: a lease per link in the store's records
// (internal/placement), held under this broker's node name. A broker of
// its own (not shared, or a store without records) runs every link
// itself: ok is false.
func (b *Broker) linkPlacer() (p *placement.Lease, ok bool) {
	rs, ok := b.stores.Meta.(meta.Records)
	if !ok || !b.shared() {
		return nil, false
	}
	return placement.NewLease(rs, b.nodeID, b.opts.LinkLease), true
}
