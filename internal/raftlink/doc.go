// Package raftlink is what the members of Warren's raft groups share on
// the wire, whichever engine runs the groups (meta/raft's one group,
// internal/multiraft's many): the handshake that authenticates a
// connection between two members before anything else on it is read, the
// sealed records every frame travels in after a handshake with the
// cluster secret, length-prefixed frames whose buffers grow with what
// arrived, the check of a raft message from the network before it
// reaches etcd raft's Step, and the connections' handling both TCP
// transports share (Conns: the accept loop, at most MaxHandshakes
// connections waiting to authenticate, a removed member's connections
// closed; DialMember: a dial and handshake bounded and cut short by one
// context; CheckTransport and SetDefaults for their settings).
//
// Each user names its Protocol (a magic and a label), so a connection
// meant for one transport is never taken for another's: the handshakes
// differ from the first byte and the keys from the labels.
//
// It promises: no frame is read from a connection whose dialer has not
// proved it is a member the acceptor knows (and, with a secret, that it
// holds the secret); with a secret, no byte can be inserted, changed,
// replayed or moved between connections by anyone without it; what a
// peer can make a member buffer is bounded by what it sent, never by a
// length it announced; and a raft message CheckMessage passes cannot make
// etcd raft panic or overflow a term or an index.
package raftlink
