package server

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// settings are the server's flags and where each value came from. Values
// come, highest first, from the command line, a WARREN_* environment
// variable, a RabbitMQ RABBITMQ_* environment variable, the rabbitmq.conf
// file of -config, and the flag's default; a source never overrides a
// higher one (set).
type settings struct {
	fs *flag.FlagSet
	// origin is where each flag's value came from, by flag name;
	// absent: the default.
	origin map[string]origin
	// ignored are the config file's unknown keys that -unknown-keys warn
	// let through, as "path: line N: unknown key K", logged at start.
	ignored []string

	addr, dataDir, user, password, httpAddr, httpOrigins, defsFile   *string
	rabbitVersion, product, tlsAddr, tlsCert, tlsKey, tlsCA          *string
	mechanisms, peers, raftCert, raftKey, raftCA, secretFile         *string
	configFile, logFormat, logLevel, unknownKeys, leaderLocator      *string
	memory, verbose, remoteGuest, raftInsecure, showVersion, printIt *bool
	queueGroups, queueGroupsOver                                     *bool
	httpMaxConns                                                     *int
	consumerTimeout, deadAfter, heartbeat                            *time.Duration
	memWatermark, storeMemory, diskFreeLimit                         *int64
	nodeID                                                           *uint64
	frameMax, channelMax, maxMessageSize                             *uint

	// auth holds rabbitmq.conf's auth_* keys and the chain they build
	// (auth_config.go).
	auth authConfig
}

// origin is where a flag's value came from: what print-config shows and
// how strong it is (a set of lower rank leaves it alone).
type origin struct {
	source string // "flag", "env NAME", "file PATH:LINE"
	rank   int
}

// The ranks of the sources, lowest first.
const (
	rankFile = iota + 1
	rankRabbitEnv
	rankWarrenEnv
	rankFlag
)

// newSettings declares the flags on a fresh FlagSet writing its usage to
// stderr.
func newSettings(stderr io.Writer) *settings {
	fs := flag.NewFlagSet("warren", flag.ContinueOnError)
	fs.SetOutput(stderr)
	s := &settings{fs: fs, origin: map[string]origin{}}
	s.addr = fs.String("addr", "127.0.0.1:5672", "address to listen on (host:port)")
	s.dataDir = fs.String("data", defaultDataDir(), "directory for persistent data (Pebble)")
	s.memory = fs.Bool("memory", false, "keep everything in memory; ignores -data")
	s.user = fs.String("user", "guest", "user name clients log in with")
	s.password = fs.String("password", "guest", "password for -user")
	s.verbose = fs.Bool("v", false, "log at debug level (connection events); the same as -log-level debug")
	s.logLevel = fs.String("log-level", "info", "lowest level logged: debug, info, warning, error or none (re-read on SIGHUP)")
	s.logFormat = fs.String("log-format", "text", "log format on stderr: text (slog's key=value) or json")
	s.httpAddr = fs.String("http", "", "serve the management API (/api/) and metrics (/metrics, /metrics/per-object) on this address")
	s.httpMaxConns = fs.Int("http-max-connections", 0, "HTTP connections open at once on -http; more take an idle one's place or are closed (0: 256)")
	s.httpOrigins = fs.String("http-allow-origins", "", "origins (scheme://host[:port], comma-separated, or *) whose web pages may change things through the management API (RabbitMQ's management.cors.allow_origins)")
	s.defsFile = fs.String("definitions", "", "import this RabbitMQ definitions file at start")
	s.remoteGuest = fs.Bool("allow-remote-guest", false, "let the guest user log in from non-loopback addresses (RabbitMQ refuses by default)")
	s.consumerTimeout = fs.Duration("consumer-timeout", 0, "close a channel that holds a delivery unacknowledged this long (0: 30m, negative: never)")
	s.heartbeat = fs.Duration("heartbeat", 0, "heartbeat interval proposed to clients, whole seconds (0: 60s, negative: none)")
	s.frameMax = fs.Uint("frame-max", 0, "largest frame in bytes accepted and proposed (0: 131072)")
	s.channelMax = fs.Uint("channel-max", 0, "highest channel number a client may open (0: 2047)")
	s.maxMessageSize = fs.Uint("max-message-size", 0, "largest message body in bytes (0: the -rabbitmq-version's default)")
	s.rabbitVersion = fs.String("rabbitmq-version", "", `RabbitMQ release whose behaviour to copy where versions differ: a series (3.13, 4.0, 4.1, 4.2, 4.3, 4.4: its newest release) or a release such as 4.3.2 ("" means 3.13)`)
	s.product = fs.String("product", "", `product name in connection.start ("" means Warren; "RabbitMQ" for clients that gate features on it)`)
	s.tlsAddr = fs.String("tls-listen", "", "also serve AMQP over TLS on this address (host:port); off when empty")
	s.tlsCert = fs.String("tls-cert", "", "PEM certificate (chain) of the TLS listener")
	s.tlsKey = fs.String("tls-key", "", "PEM private key of -tls-cert")
	s.tlsCA = fs.String("tls-ca", "", "PEM CA bundle for client certificates: when set, clients are asked for one and it must verify")
	s.memWatermark = fs.Int64("memory-high-watermark", 0, "block publishers while message bytes and caches held in memory exceed this (0: 40% of RAM or the cgroup limit, negative: off)")
	s.storeMemory = fs.Int64("store-memory", 0, "bytes of memory the Pebble store under -data may hold: its block cache, each memtable a quarter (0: a 64 MiB cache and 4 MiB memtables)")
	s.diskFreeLimit = fs.Int64("disk-free-limit", 0, "block publishers while the data directory's file system has fewer free bytes (0: 50 MB, negative: off)")
	s.mechanisms = fs.String("auth-mechanisms", "PLAIN,AMQPLAIN", "SASL mechanisms offered, comma-separated (PLAIN, AMQPLAIN, EXTERNAL)")
	s.nodeID = fs.Uint64("node-id", 0, "run as this member of a raft cluster (with -peers); every member serves AMQP on its -addr")
	s.peers = fs.String("peers", "", "cluster members, id=raft-host:port comma-separated, this node included")
	s.deadAfter = fs.Duration("dead-after", 0, "cluster: return a member's unacknowledged deliveries once the raft leader has not heard from it this long (0: 10s)")
	s.raftCert = fs.String("raft-tls-cert", "", "cluster: PEM certificate of this member (for server and client auth): members talk mutual TLS")
	s.raftKey = fs.String("raft-tls-key", "", "cluster: PEM private key of -raft-tls-cert")
	s.raftCA = fs.String("raft-tls-ca", "", "cluster: PEM CA bundle the other members' certificates must verify against")
	s.secretFile = fs.String("cluster-secret-file", "", "cluster: file holding the cluster secret, the same on every member (default: cluster-secret in -data, generated on a founding member's first start)")
	s.raftInsecure = fs.Bool("raft-insecure", false, "cluster: members do not authenticate each other: anyone who reaches a raft address can stop the cluster (only for a network nobody else reaches)")
	s.queueGroups = fs.Bool("queue-groups", false, "cluster: give each durable quorum queue and stream a raft group of its own (off: every durable queue in the metadata group, as before); every member must set it alike")
	s.leaderLocator = fs.String("queue-leader-locator", "client-local", "cluster: where a new quorum queue's or stream's leader goes when neither its policy nor its x-queue-leader-locator says: client-local (the declaring member) or balanced (RabbitMQ's queue_leader_locator)")
	s.queueGroupsOver = fs.Bool("queue-groups-over-existing", false, "cluster: start queue groups on a data directory written without them: its queues keep their data in the metadata group, only new ones get groups")
	s.configFile = fs.String("config", "", "read settings from this rabbitmq.conf file (RabbitMQ's key = value format); flags and environment variables win over it (default: $RABBITMQ_CONFIG_FILE)")
	s.unknownKeys = fs.String("unknown-keys", "refuse", "what -config does with a key Warren does not map: refuse (the server does not start) or warn (logged with its line, then ignored)")
	s.showVersion = fs.Bool("version", false, "print the version and build information and exit")
	s.printIt = fs.Bool("print-config", false, "print the effective settings and where each came from (default, flag, env, file:line), then exit")
	return s
}

// loadSettings reads args, then the environment, then the -config file,
// each filling only what the ones before left unset.
func loadSettings(args []string, stderr io.Writer) (*settings, error) {
	s := newSettings(stderr)
	if err := s.fs.Parse(args); err != nil {
		return nil, err
	}
	if s.fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags only)", s.fs.Arg(0))
	}
	s.fs.Visit(func(f *flag.Flag) { s.origin[f.Name] = origin{"flag", rankFlag} })
	if err := s.applyEnv(os.LookupEnv); err != nil {
		return nil, err
	}
	if *s.unknownKeys != "refuse" && *s.unknownKeys != "warn" {
		return nil, fmt.Errorf("-unknown-keys is refuse or warn, not %q", *s.unknownKeys)
	}
	if *s.configFile != "" {
		if err := applyConfigFile(s, *s.configFile); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// set sets flag name to value from o, unless a stronger source set it.
func (s *settings) set(name, value string, o origin) error {
	if cur, ok := s.origin[name]; ok && cur.rank > o.rank {
		return nil
	}
	if err := s.fs.Set(name, value); err != nil {
		return err
	}
	s.origin[name] = o
	return nil
}

// noEnv are the flags no environment variable sets: they ask for an
// action, not a setting.
var noEnv = map[string]bool{"version": true, "print-config": true}

// envName is the WARREN_* variable of flag name: -memory-high-watermark
// is WARREN_MEMORY_HIGH_WATERMARK.
func envName(flagName string) string {
	return "WARREN_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets flags from WARREN_* variables (one per flag, envName) and
// from the RabbitMQ variables that map to a Warren setting
// (rabbitmq-server(8), rabbitmq-env.conf(5), RabbitMQ 4.x). An empty
// variable counts as unset, as RabbitMQ's scripts treat it.
func (s *settings) applyEnv(lookup func(string) (string, bool)) error {
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		return v, ok && v != ""
	}
	var err error
	s.fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		if v, ok := get(name); ok && err == nil && !noEnv[f.Name] {
			if e := s.set(f.Name, v, origin{"env " + name, rankWarrenEnv}); e != nil {
				err = fmt.Errorf("$%s: %w", name, e)
			}
		}
	})
	if err != nil {
		return err
	}
	rabbit := func(name, flagName string, conv func(string) (string, error)) error {
		v, ok := get(name)
		if !ok {
			return nil
		}
		if conv != nil {
			if v, err = conv(v); err != nil {
				return fmt.Errorf("$%s: %w", name, err)
			}
		}
		if err := s.set(flagName, v, origin{"env " + name, rankRabbitEnv}); err != nil {
			return fmt.Errorf("$%s: %w", name, err)
		}
		return nil
	}
	ip, hasIP := get("RABBITMQ_NODE_IP_ADDRESS")
	port, hasPort := get("RABBITMQ_NODE_PORT")
	if hasIP || hasPort {
		// RabbitMQ's defaults for the one not given: every interface,
		// port 5672.
		if !hasPort {
			port = "5672"
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return fmt.Errorf("$RABBITMQ_NODE_PORT: %q is not a port", port)
		}
		if hasIP && net.ParseIP(ip) == nil {
			return fmt.Errorf("$RABBITMQ_NODE_IP_ADDRESS: %q is not an IP address", ip)
		}
		src := "env RABBITMQ_NODE_IP_ADDRESS"
		if hasPort {
			src = "env RABBITMQ_NODE_PORT"
			if hasIP {
				src = "env RABBITMQ_NODE_IP_ADDRESS, RABBITMQ_NODE_PORT"
			}
		}
		if err := s.set("addr", net.JoinHostPort(ip, port), origin{src, rankRabbitEnv}); err != nil {
			return err
		}
	}
	for _, m := range []struct {
		env, flag string
		conv      func(string) (string, error)
	}{
		{"RABBITMQ_CONFIG_FILE", "config", nil},
		{"RABBITMQ_DEFAULT_USER", "user", nil},
		{"RABBITMQ_DEFAULT_PASS", "password", nil},
		// The node's data directory is $RABBITMQ_MNESIA_BASE/<node
		// name> in RabbitMQ; Warren's node has the name warren.
		// RABBITMQ_MNESIA_DIR names the directory itself and wins.
		{"RABBITMQ_MNESIA_BASE", "data", func(v string) (string, error) { return filepath.Join(v, "warren"), nil }},
		{"RABBITMQ_MNESIA_DIR", "data", nil},
	} {
		if err := rabbit(m.env, m.flag, m.conv); err != nil {
			return err
		}
	}
	return nil
}

// secretFlags are never printed.
var secretFlags = map[string]bool{"password": true}

// print writes every setting, its value and where it came from, one a
// line, in flag order (print-config).
func (s *settings) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tFROM")
	s.fs.VisitAll(func(f *flag.Flag) {
		if noEnv[f.Name] {
			return
		}
		v := f.Value.String()
		if secretFlags[f.Name] {
			v = "********"
		}
		if v == "" {
			v = `""`
		}
		src := "default"
		if o, ok := s.origin[f.Name]; ok {
			src = o.source
		}
		fmt.Fprintf(tw, "-%s\t%s\t%s\n", f.Name, v, src)
	})
	return tw.Flush()
}

// levelNone is above every level slog writes: -log-level none.
const levelNone = slog.Level(1 << 20)

// parseLevel reads -log-level: RabbitMQ's level names (log.console.level)
// as slog has them; critical, alert and emergency log as error.
func parseLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "notice":
		return slog.LevelInfo, nil
	case "warning", "warn":
		return slog.LevelWarn, nil
	case "error", "critical", "alert", "emergency":
		return slog.LevelError, nil
	case "none":
		return levelNone, nil
	}
	return 0, fmt.Errorf("log level %q is not debug, info, warning, error or none", s)
}

// level is the level the settings ask for: -log-level, or debug with -v
// unless -log-level was given too.
func (s *settings) level() (slog.Level, error) {
	if _, set := s.origin["log-level"]; *s.verbose && !set {
		return slog.LevelDebug, nil
	}
	return parseLevel(*s.logLevel)
}

// newLogger builds the stderr logger of -log-format at level.
func (s *settings) newLogger(stderr io.Writer, level slog.Leveler) (*slog.Logger, error) {
	o := &slog.HandlerOptions{Level: level}
	switch *s.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(stderr, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(stderr, o)), nil
	}
	return nil, errors.New(`-log-format must be text or json`)
}
