package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/cluster"
	"github.com/warrenmq/broker/meta/raft"
)

// parsePeers reads -peers: comma-separated id=raft-host:port entries, for
// example "1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003".
func parsePeers(s string) ([]raft.Peer, error) {
	var peers []raft.Peer
	for _, item := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil || n == 0 || addr == "" {
			return nil, fmt.Errorf("-peers: %q is not id=host:port with an id above 0", item)
		}
		peers = append(peers, raft.Peer{ID: n, RaftAddr: addr})
	}
	return peers, nil
}

// runCluster runs this process as member id of a raft cluster: it
// replicates everything and serves AMQP on addr, for every durable queue,
// while it knows a raft leader (see package cluster).
func runCluster(ctx context.Context, id uint64, peersFlag, addr, dataDir string, opts broker.Options, stdout io.Writer, logger *slog.Logger) error {
	peers, err := parsePeers(peersFlag)
	if err != nil {
		return err
	}
	others := map[uint64]string{}
	self := ""
	for _, p := range peers {
		if p.ID == id {
			self = p.RaftAddr
		} else {
			others[p.ID] = p.RaftAddr
		}
	}
	if self == "" {
		return fmt.Errorf("-peers has no entry for -node-id %d", id)
	}
	if addr == "" {
		return errors.New("a cluster node needs -addr: it serves AMQP there")
	}
	l, err := net.Listen("tcp", self)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	transport, err := raft.NewTCPTransport(raft.TCPConfig{ID: id, Listener: l, Peers: others})
	if err != nil {
		l.Close()
		return err
	}
	defer transport.Close()
	opts.DataDir = ""
	node, err := cluster.Start(cluster.Config{
		Raft:   raft.Config{ID: id, Dir: dataDir, Peers: peers, Transport: transport, Logger: logger},
		Broker: opts,
		Listen: addr,
	})
	if err != nil {
		return err
	}
	logger.Info("warren cluster node", "id", id, "raft", l.Addr().String(), "amqp", addr, "data", dataDir)
	fmt.Fprintln(stdout, "raft listening on", l.Addr().String())
	<-ctx.Done()
	logger.Info("shutting down")
	return node.Stop()
}
