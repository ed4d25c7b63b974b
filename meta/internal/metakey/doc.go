// Package metakey is the key layout of meta.Store entities in an ordered
// key-value store (meta.KV): package meta writes every entity under it, on
// meta/memory, meta/local (Pebble on one node) and meta/raft (Pebble under
// a raft state machine) alike, and the backends read it for what they do
// with keys themselves (cursors, the change feed).
//
// Every key starts with 'm' and a kind byte. Strings inside a key are
// length-prefixed (uvarint) where another field follows, so one name is
// never a prefix of another and every listing is one prefix scan:
//
//	m v name                          vhost
//	m u name                          user
//	m p lp(user) vhost                permission
//	m e lp(vhost) name                exchange
//	m q lp(vhost) name                queue
//	m c lp(vhost) name                cursor
//	m l lp(vhost) name                vhost limit
//	m t lp(user) lp(vhost) exchange   topic permission
//	m b lp(vhost) lp(source) lp(kind) lp(destination) lp(routing key) arguments
//	                                  binding
//	m y lp(vhost) name                policy
//	m o lp(vhost) name                operator policy
//	m r lp(component) lp(vhost) name  runtime parameter
//	m g name                          global parameter
//
// The layout is on disk: changing it breaks existing data directories.
package metakey
