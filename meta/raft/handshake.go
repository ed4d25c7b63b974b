package raft

import "github.com/warrenmq/broker/internal/raftlink"

// protocol is this transport's members' handshake (raftlink's, with its
// checks, proofs and sealed records) under magic "WRNR": a connection
// meant for another of Warren's raft transports fails at its first bytes.
//
//	dialer → acceptor   hello      "WRNR" | version 1 | kind | auth | 0 |
//	                               from id (8) | to id (8) | nonce (32)        56 bytes
//	acceptor → dialer   challenge  "WRNR" | version | status | auth | 0 |
//	                               id (8) | nonce (32) | proof (32)            80 bytes
//	dialer → acceptor   proof      (32 bytes; cluster secret only)
//	acceptor → dialer   verdict    (1 byte: 0 accepted)
//
// kind is kindRaft or kindMessages. The proofs are keyed with the cluster
// secret under "warren-raft-v1".
var protocol = raftlink.Protocol{Magic: "WRNR", Label: "warren-raft-v1", Name: "raft", MaxKind: kindMessages}

// What a connection carries, said in its hello.
const (
	kindRaft     byte = 1 // raft's messages
	kindMessages byte = 2 // Messages (Messenger)
)
