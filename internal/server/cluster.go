package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

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

// memberTLS builds the raft transport's mutual TLS from -raft-tls-*: each
// member presents its certificate as a server and as a client, and accepts
// only peers whose certificates verify against the CA bundle. All three
// flags or none.
func memberTLS(certFile, keyFile, caFile string) (*raft.TCPConfig, error) {
	if certFile == "" && keyFile == "" && caFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, errors.New("-raft-tls-cert, -raft-tls-key and -raft-tls-ca go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("raft tls: %w", err)
	}
	pool, err := loadCAs(caFile)
	if err != nil {
		return nil, fmt.Errorf("raft tls: %w", err)
	}
	return &raft.TCPConfig{
		ServerTLS: &tls.Config{
			Certificates: []tls.Certificate{cert}, ClientCAs: pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		},
		ClientTLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
	}, nil
}

// clusterFlags are the flags of a cluster node.
type clusterFlags struct {
	id                      uint64
	peers                   string
	addr, tlsAddr, httpAddr string
	httpLimits              broker.HTTPLimits
	dataDir                 string
	deadAfter               time.Duration
	raftTLS                 *raft.TCPConfig // nil: no TLS between members
	secretFile              string          // -cluster-secret-file
	insecure                bool            // -raft-insecure
	queueGroups             bool            // -queue-groups
	queueGroupsOver         bool            // -queue-groups-over-existing
	leaderLocator           string          // -queue-leader-locator
}

// memberAuth sets how this member and the others prove to each other
// that they belong to the cluster: the cluster secret of -cluster-secret-file,
// or else the one in the data directory (generated on a founding member's
// first start), unless they use mutual TLS (-raft-tls-*) without a secret,
// or -raft-insecure turned authentication off.
func memberAuth(f clusterFlags, tcfg *raft.TCPConfig, logger *slog.Logger) error {
	switch {
	case f.insecure:
		tcfg.Insecure = true
	case f.secretFile != "":
		secret, err := raft.ReadSecretFile(f.secretFile)
		if err != nil {
			return err
		}
		tcfg.Secret = secret
	case f.raftTLS == nil:
		secret, generated, err := raft.LoadSecret(f.dataDir, false)
		if errors.Is(err, raft.ErrNoSecret) {
			return fmt.Errorf("%w; or give every member the same secret file with -cluster-secret-file", err)
		}
		if err != nil {
			return err
		}
		if generated {
			file := filepath.Join(f.dataDir, raft.SecretFile)
			logger.Warn("cluster: generated a new cluster secret: every other member needs the same one, "+
				"copy this file into their -data directories or start them with -cluster-secret-file", "file", file)
		}
		tcfg.Secret = secret
	}
	return nil
}

// runCluster runs this process as member f.id of a raft cluster: it
// replicates everything and serves AMQP on f.addr (and f.tlsAddr), for
// every durable queue, while it knows a raft leader (see package cluster).
func runCluster(ctx context.Context, f clusterFlags, opts broker.Options, stdout io.Writer, logger *slog.Logger) error {
	peers, err := parsePeers(f.peers)
	if err != nil {
		return err
	}
	others := map[uint64]string{}
	self := ""
	for _, p := range peers {
		if p.ID == f.id {
			self = p.RaftAddr
		} else {
			others[p.ID] = p.RaftAddr
		}
	}
	if self == "" {
		return fmt.Errorf("-peers has no entry for -node-id %d", f.id)
	}
	l, err := net.Listen("tcp", self)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	tcfg := raft.TCPConfig{ID: f.id, Listener: l, Peers: others, Logger: logger}
	if f.raftTLS != nil {
		tcfg.ServerTLS, tcfg.ClientTLS = f.raftTLS.ServerTLS, f.raftTLS.ClientTLS
	}
	if err := memberAuth(f, &tcfg, logger); err != nil {
		l.Close()
		return err
	}
	transport, err := raft.NewTCPTransport(tcfg)
	if err != nil {
		l.Close()
		return err
	}
	defer transport.Close()
	opts.DataDir = ""
	node, err := cluster.Start(cluster.Config{
		Raft:      raft.Config{ID: f.id, Dir: f.dataDir, Peers: peers, Transport: transport, Logger: logger},
		Broker:    opts,
		Listen:    f.addr,
		ListenTLS: f.tlsAddr,
		DeadAfter: f.deadAfter,

		QueueGroups:             f.queueGroups,
		QueueGroupsOverExisting: f.queueGroupsOver,
		QueueLeaderLocator:      f.leaderLocator,
	})
	if err != nil {
		return err
	}
	logger.Info("warren cluster node", "id", f.id, "raft", l.Addr().String(), "raft_tls", f.raftTLS != nil,
		"cluster_secret", tcfg.Secret != nil,
		"amqp", f.addr, "amqps", f.tlsAddr, "data", f.dataDir)
	fmt.Fprintln(stdout, "raft listening on", l.Addr().String())

	stopWeb := func() {}
	if f.httpAddr != "" {
		if stopWeb, err = serveHTTP(f.httpAddr, clusterHTTP(node), f.httpLimits, stdout, logger); err != nil {
			_ = node.Stop()
			return err
		}
	}

	<-ctx.Done()
	logger.Info("shutting down")
	stopWeb()
	return node.Stop()
}

// clusterHTTP serves the management API and metrics of whichever broker
// the node runs now (it is replaced after a pause), and 503 while it runs
// none.
func clusterHTTP(node *cluster.Node) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", &currentBroker{node: node, handler: (*broker.Broker).ManagementHandler})
	mux.Handle("/metrics", &currentBroker{node: node, handler: func(b *broker.Broker) http.Handler {
		return b.MetricsHandler(broker.MetricsOptions{})
	}})
	mux.Handle("/metrics/per-object", &currentBroker{node: node, handler: func(b *broker.Broker) http.Handler {
		return b.MetricsHandler(perObjectMetrics)
	}})
	return mux
}

// currentBroker serves a handler of the node's current broker, made once
// per broker.
type currentBroker struct {
	node    *cluster.Node
	handler func(*broker.Broker) http.Handler

	mu sync.Mutex
	b  *broker.Broker
	h  http.Handler
}

func (c *currentBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b := c.node.Broker()
	if b == nil {
		http.Error(w, "this cluster node serves no broker now (starting, or paused without a raft leader)", http.StatusServiceUnavailable)
		return
	}
	c.mu.Lock()
	if c.b != b {
		c.b, c.h = b, c.handler(b)
	}
	h := c.h
	c.mu.Unlock()
	h.ServeHTTP(w, r)
}
