package vhost

import "github.com/warrenmq/broker/routing"

// told tells Config.Bindings of a binding added to (created) or removed
// from the routing table: by Bind and Unbind, by the deletion of its
// source or destination, and by Sync following another broker. Open's
// loading of the stored bindings tells nothing (they were there before).
func (v *VHost) told(b routing.Binding, created bool) {
	if v.cfg.Bindings != nil {
		v.cfg.Bindings(b, created)
	}
}
