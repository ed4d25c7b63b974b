package server

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/warrenmq/broker/internal/rabbitconf"
)

// defaultRaftPort is the raft port of a cluster_formation node named
// without one (rabbit@host): RabbitMQ's inter-node port, 25672.
const defaultRaftPort = "25672"

// applyConfigFile sets, from the rabbitmq.conf file path, every setting
// that the command line and the environment left unset. Keys are
// RabbitMQ 4.x's names; a key Warren does not map is refused with its
// line (or, with -unknown-keys warn, noted in s.ignored and skipped). A
// key repeated in the file takes its last value. The auth keys go to
// s.auth (auth_config.go), which builds Options.Auth.
func applyConfigFile(s *settings, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	entries, err := rabbitconf.Parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	from := func(e rabbitconf.Entry) origin {
		return origin{fmt.Sprintf("file %s:%d", path, e.Line), rankFile}
	}
	var mgmtIP, mgmtPort *rabbitconf.Entry
	nodes := map[uint64]rabbitconf.Entry{}
	var tab rabbitconf.Table
	flagKey := func(key, name string, conv func(string) (string, error)) {
		tab.Key(key, func(e rabbitconf.Entry) error {
			v, err := conv(e.Value)
			if err != nil {
				return err
			}
			return s.set(name, v, from(e))
		})
	}
	same := func(s string) (string, error) { return s, nil }
	bytes := func(s string) (string, error) {
		n, err := rabbitconf.Bytes(s)
		return strconv.FormatInt(n, 10), err
	}
	listener := func(s string) (string, error) {
		if _, err := strconv.ParseUint(s, 10, 16); err == nil {
			return ":" + s, nil // a port alone: every interface, as RabbitMQ
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return "", fmt.Errorf("%q is neither a port nor host:port", s)
		}
		return s, nil
	}
	uint := func(max uint64) func(string) (string, error) {
		return func(s string) (string, error) {
			n, err := rabbitconf.Int(s, max)
			return strconv.FormatUint(n, 10), err
		}
	}
	flagKey("listeners.tcp.default", "addr", listener)
	flagKey("listeners.ssl.default", "tls-listen", listener)
	flagKey("ssl_options.certfile", "tls-cert", same)
	flagKey("ssl_options.keyfile", "tls-key", same)
	flagKey("ssl_options.cacertfile", "tls-ca", same)
	flagKey("default_user", "user", same)
	flagKey("default_pass", "password", same)
	flagKey("vm_memory_high_watermark.absolute", "memory-high-watermark", bytes)
	flagKey("disk_free_limit.absolute", "disk-free-limit", bytes)
	flagKey("consumer_timeout", "consumer-timeout", func(s string) (string, error) {
		ms, err := rabbitconf.Int(s, 1<<53)
		return strconv.FormatUint(ms, 10) + "ms", err // milliseconds in rabbitmq.conf
	})
	flagKey("loopback_users.guest", "allow-remote-guest", func(s string) (string, error) {
		b, err := rabbitconf.Bool(s)
		return strconv.FormatBool(!b), err
	})
	flagKey("heartbeat", "heartbeat", func(s string) (string, error) {
		n, err := rabbitconf.Int(s, 65535)
		if n == 0 {
			return "-1s", err // 0 turns heartbeats off in RabbitMQ
		}
		return strconv.FormatUint(n, 10) + "s", err
	})
	flagKey("queue_leader_locator", "queue-leader-locator", same)
	flagKey("frame_max", "frame-max", uint(1<<32-1))
	flagKey("channel_max", "channel-max", uint(65535))
	flagKey("max_message_size", "max-message-size", uint(512<<20))

	// Logging: Warren logs to stderr only, which is RabbitMQ's console
	// output; log.file may only turn the file output off.
	flagKey("log.console.level", "log-level", checkedLevel)
	flagKey("log.default.level", "log-level", checkedLevel)
	flagKey("log.console.formatter", "log-format", func(s string) (string, error) {
		switch s {
		case "plaintext":
			return "text", nil
		case "json":
			return "json", nil
		}
		return "", fmt.Errorf("%q is neither plaintext nor json", s)
	})
	tab.Key("log.console", func(e rabbitconf.Entry) error {
		on, err := rabbitconf.Bool(e.Value)
		if err == nil && !on {
			err = fmt.Errorf("warren logs to stderr (the console) only: it cannot be turned off; use log.console.level = none")
		}
		return err
	})
	tab.Key("log.file", func(e rabbitconf.Entry) error {
		if e.Value != "false" {
			return fmt.Errorf("warren logs to stderr only (log.console): log.file may only be false")
		}
		return nil
	})

	tab.Key("management.tcp.port", func(e rabbitconf.Entry) error {
		_, err := rabbitconf.Int(e.Value, 65535)
		mgmtPort = &e
		return err
	})
	tab.Key("management.tcp.ip", func(e rabbitconf.Entry) error {
		if net.ParseIP(e.Value) == nil {
			return fmt.Errorf("%q is not an IP address", e.Value)
		}
		mgmtIP = &e
		return nil
	})

	// Cluster peers: RabbitMQ's classic peer discovery lists the
	// members' node names; Warren's raft needs an id and an address for
	// each: the id is the number after nodes., the address the host of
	// the node name with the raft port (see clusterNode).
	tab.Key("cluster_formation.peer_discovery_backend", func(e rabbitconf.Entry) error {
		switch e.Value {
		case "classic_config", "rabbit_peer_discovery_classic_config":
			return nil
		}
		return fmt.Errorf("%q: warren's members are listed with cluster_formation.classic_config.nodes.N only", e.Value)
	})
	tab.Prefix("cluster_formation.classic_config.nodes.", func(e rabbitconf.Entry) error {
		n, err := strconv.ParseUint(strings.TrimPrefix(e.Key, "cluster_formation.classic_config.nodes."), 10, 64)
		if err != nil || n == 0 {
			return fmt.Errorf("the node's number must be an integer above 0: it is its raft id")
		}
		if _, err := clusterNode(e.Value); err != nil {
			return err
		}
		nodes[n] = e
		return nil
	})

	s.auth.register(&tab)
	var unknown func(rabbitconf.Entry) error // nil: refused
	if *s.unknownKeys == "warn" {
		unknown = func(e rabbitconf.Entry) error {
			s.ignored = append(s.ignored, fmt.Sprintf("%s: line %d: unknown key %s", path, e.Line, e.Key))
			return nil
		}
	}
	if err := tab.Apply(entries, unknown); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := s.auth.build(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if mgmtPort != nil || mgmtIP != nil {
		ip, port, e := "", "15672", mgmtPort
		if mgmtIP != nil {
			ip = mgmtIP.Value
		}
		if mgmtPort != nil {
			port = mgmtPort.Value
		} else {
			e = mgmtIP
		}
		if err := s.set("http", net.JoinHostPort(ip, port), from(*e)); err != nil {
			return err
		}
	}
	if len(nodes) > 0 {
		if err := applyClusterNodes(s, nodes, from); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// checkedLevel is a log level, checked.
func checkedLevel(s string) (string, error) {
	_, err := parseLevel(s)
	return s, err
}

// clusterNode is the raft address of a cluster_formation node: the host
// of a RabbitMQ node name (rabbit@host) with port 25672, or host:port
// (Warren's extension, for a raft port of one's own).
func clusterNode(v string) (string, error) {
	if _, host, ok := strings.Cut(v, "@"); ok && host != "" {
		if _, _, err := net.SplitHostPort(host); err == nil {
			return host, nil
		}
		return net.JoinHostPort(host, defaultRaftPort), nil
	}
	if _, _, err := net.SplitHostPort(v); err == nil {
		return v, nil
	}
	return "", fmt.Errorf("%q is neither a node name (rabbit@host) nor host:port", v)
}

// applyClusterNodes sets -peers from the cluster_formation nodes and,
// unless given elsewhere, -node-id: the node whose host is this machine's
// host name (as RabbitMQ finds itself among them by node name).
func applyClusterNodes(s *settings, nodes map[uint64]rabbitconf.Entry, from func(rabbitconf.Entry) origin) error {
	ids := make([]uint64, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var peers []string
	for _, id := range ids {
		addr, _ := clusterNode(nodes[id].Value)
		peers = append(peers, fmt.Sprintf("%d=%s", id, addr))
	}
	first := nodes[ids[0]]
	if err := s.set("peers", strings.Join(peers, ","), from(first)); err != nil {
		return err
	}
	if _, set := s.origin["node-id"]; set {
		return nil
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("cluster_formation: this machine's host name: %w; set -node-id", err)
	}
	short, _, _ := strings.Cut(host, ".")
	for _, id := range ids {
		addr, _ := clusterNode(nodes[id].Value)
		h, _, _ := net.SplitHostPort(addr)
		if h == host || h == short {
			return s.set("node-id", strconv.FormatUint(id, 10), from(nodes[id]))
		}
	}
	return fmt.Errorf("cluster_formation.classic_config.nodes: none is on this host (%s); set -node-id or $WARREN_NODE_ID", host)
}
