// Package vhosts is the broker's set of open vhosts, by canonical name
// ("" and "/" are the same vhost): opened at start from the configured
// names and the store, created, updated and removed at run time, and in
// shared mode kept in step with the vhost list other brokers change.
//
// A vhost being removed is remembered until its removal is done, so that
// shared mode does not open it again from the store meanwhile. Opening a
// vhost stores it first, except one another broker stored: that one may
// be being deleted, and storing it again would bring it back.
package vhosts
