package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/testcert"
)

// printConfig runs -print-config with args and returns each setting's
// value and source, by flag name.
func printConfig(t *testing.T, args ...string) map[string][2]string {
	t.Helper()
	var out strings.Builder
	require.NoError(t, run(context.Background(), append(args, "-print-config"), &out, io.Discard))
	got := map[string][2]string{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		require.GreaterOrEqual(t, len(f), 3, sc.Text())
		got[strings.TrimPrefix(f[0], "-")] = [2]string{f[1], strings.Join(f[2:], " ")}
	}
	return got
}

// TestPrintConfigSources: each setting comes from the strongest source
// that has it (flag, WARREN_*, RABBITMQ_*, the file, the default), and
// -print-config says which, with the file's line; the password is never
// printed.
func TestPrintConfigSources(t *testing.T) {
	conf := writeFile(t, t.TempDir(), "rabbitmq.conf", []byte(`# from RabbitMQ's docs
listeners.tcp.default = 5673
default_user = fileuser
default_pass = filepass
consumer_timeout = 900000
log.console.formatter = json
log.console.level = warning
heartbeat = 0
queue_leader_locator = balanced
`))
	t.Setenv("RABBITMQ_CONFIG_FILE", conf)
	t.Setenv("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
	t.Setenv("RABBITMQ_NODE_PORT", "5699")
	t.Setenv("RABBITMQ_DEFAULT_USER", "envuser")
	t.Setenv("RABBITMQ_MNESIA_BASE", "/var/lib/rabbitmq/mnesia")
	t.Setenv("WARREN_HEARTBEAT", "")  // empty: unset
	t.Setenv("WARREN_PRODUCT", "Env") // the flag wins
	t.Setenv("WARREN_MEMORY_HIGH_WATERMARK", "1000000")
	got := printConfig(t, "-product", "Flag")
	for name, want := range map[string][2]string{
		"product":               {"Flag", "flag"},
		"memory-high-watermark": {"1000000", "env WARREN_MEMORY_HIGH_WATERMARK"},
		"addr":                  {"127.0.0.1:5699", "env RABBITMQ_NODE_IP_ADDRESS, RABBITMQ_NODE_PORT"},
		"user":                  {"envuser", "env RABBITMQ_DEFAULT_USER"},
		"password":              {"********", "file " + conf + ":4"},
		"data":                  {"/var/lib/rabbitmq/mnesia/warren", "env RABBITMQ_MNESIA_BASE"},
		"config":                {conf, "env RABBITMQ_CONFIG_FILE"},
		"consumer-timeout":      {"15m0s", "file " + conf + ":5"},
		"log-format":            {"json", "file " + conf + ":6"},
		"log-level":             {"warning", "file " + conf + ":7"},
		"heartbeat":             {"-1s", "file " + conf + ":8"},
		"queue-leader-locator":  {"balanced", "file " + conf + ":9"},
		"tls-listen":            {`""`, "default"},
		"disk-free-limit":       {"0", "default"},
	} {
		require.Equal(t, want, got[name], name)
	}
	require.NotContains(t, got, "version")
	require.NotContains(t, got, "print-config")

	t.Setenv("RABBITMQ_MNESIA_DIR", "/srv/warren")
	require.Equal(t, [2]string{"/srv/warren", "env RABBITMQ_MNESIA_DIR"}, printConfig(t)["data"], "MNESIA_DIR names the directory itself")
}

// TestEnvErrors: a variable that does not read is refused by name.
func TestEnvErrors(t *testing.T) {
	for _, tc := range []struct{ name, value, err string }{
		{"WARREN_HEARTBEAT", "soon", "$WARREN_HEARTBEAT:"},
		{"WARREN_MEMORY", "maybe", "$WARREN_MEMORY:"},
		{"RABBITMQ_NODE_PORT", "70000", "$RABBITMQ_NODE_PORT:"},
		{"RABBITMQ_NODE_IP_ADDRESS", "localhost", "$RABBITMQ_NODE_IP_ADDRESS:"},
		{"RABBITMQ_CONFIG_FILE", "/nonexistent/rabbitmq.conf", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			err := run(context.Background(), []string{"-print-config"}, io.Discard, io.Discard)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestEnvStartsServer: RabbitMQ's variables alone configure the listener
// and the default user, as rabbitmq-server's do.
func TestEnvStartsServer(t *testing.T) {
	t.Setenv("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
	t.Setenv("RABBITMQ_NODE_PORT", "0")
	t.Setenv("RABBITMQ_DEFAULT_USER", "ops")
	t.Setenv("RABBITMQ_DEFAULT_PASS", "pw")
	t.Setenv("WARREN_MEMORY", "true")
	addr := startServer(t, []string{"listening on "})[0]
	conn, err := amqp091.Dial("amqp://ops:pw@" + addr + "/")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
}

// nodeInfo is the management API's /api/nodes entry of the one node, as
// user:password.
func nodeInfo(t *testing.T, web, user, password string) map[string]any {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+web+"/api/nodes", nil)
	require.NoError(t, err)
	req.SetBasicAuth(user, password)
	var nodes []map[string]any
	require.Eventually(t, func() bool {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&nodes) == nil
	}, 30*time.Second, 20*time.Millisecond, "GET /api/nodes as %s", user)
	require.Len(t, nodes, 1)
	return nodes[0]
}

// docsConf is a rabbitmq.conf of the kind RabbitMQ's docs show
// (Configuration, Networking, TLS, Memory and Disk Alarms, Logging,
// Management): every key Warren maps that a single node uses. %s are the
// TLS files.
const docsConf = `# ======================================
# RabbitMQ broker section
# ======================================

## Networking
listeners.tcp.default = 127.0.0.1:0
listeners.ssl.default = 127.0.0.1:0

## TLS
ssl_options.cacertfile = %s
ssl_options.certfile   = %s
ssl_options.keyfile    = %s

## Default user (replaces guest)
default_user = admin
default_pass = "s3cret"
loopback_users.guest = true

## Resource limits
vm_memory_high_watermark.absolute = 2GB
disk_free_limit.absolute = 1MB
consumer_timeout = 1800000

## Connections
heartbeat = 5
frame_max = 65536
channel_max = 128

## Logging: JSON to the console only
log.console = true
log.console.level = debug
log.console.formatter = json
log.file = false

## Management
management.tcp.port = 0
management.tcp.ip   = 127.0.0.1
`

// TestDocsConfig: the docs' kind of rabbitmq.conf starts the server as it
// says: AMQP and AMQPS listeners, admin as the only user (guest is not
// created), the heartbeat, frame and channel limits proposed, the memory
// and disk limits in /api/nodes, JSON logs at debug level on stderr.
func TestDocsConfig(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "server CA")
	leaf := ca.Issue(t, "127.0.0.1", true)
	conf := writeFile(t, dir, "rabbitmq.conf", fmt.Appendf(nil, docsConf,
		writeFile(t, dir, "ca.pem", ca.PEM), writeFile(t, dir, "server.pem", leaf.CertPEM), writeFile(t, dir, "server.key", leaf.KeyPEM)))

	logs := new(amqptest.SyncBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-config", conf, "-data", filepath.Join(dir, "data")}, stdoutW, logs)
		stdoutW.Close()
	}()
	rd := bufio.NewReader(stdoutR)
	var addrs []string
	for _, prefix := range []string{"listening on ", "tls listening on ", "management on "} {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
		require.True(t, ok, "line %q", line)
		addrs = append(addrs, addr)
	}
	go io.Copy(io.Discard, rd)

	conn, err := amqp091.Dial("amqp://admin:s3cret@" + addrs[0] + "/")
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, conn.Config.Heartbeat, "the lower of the server's 5 s and the client's 10 s")
	require.Equal(t, 65536, conn.Config.FrameSize)
	require.Equal(t, uint16(128), conn.Config.ChannelMax)
	require.NoError(t, conn.Close())
	_, err = amqp091.Dial("amqp://guest:guest@" + addrs[0] + "/")
	require.Error(t, err, "guest is not created when default_user is set")
	tconn, err := amqp091.DialTLS("amqps://admin:s3cret@"+addrs[1]+"/", &tls.Config{RootCAs: ca.Pool})
	require.NoError(t, err)
	require.NoError(t, tconn.Close())

	node := nodeInfo(t, addrs[2], "admin", "s3cret")
	require.Equal(t, float64(2e9), node["mem_limit"])
	require.Equal(t, float64(1e6), node["disk_free_limit"], "MB is 10^6 bytes")

	cancel()
	require.NoError(t, <-done)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	levels := map[string]bool{}
	for _, l := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "every log line is JSON: %q", l)
		levels[rec["level"].(string)] = true
	}
	require.True(t, levels["DEBUG"], "log.console.level = debug: %v", levels)
}

// TestDocsConfigCluster: the docs' file with classic peer discovery
// (cluster_formation.classic_config.nodes.N) starts a cluster member,
// here the only one, which serves AMQP as admin with the file's limits.
func TestDocsConfigCluster(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "server CA")
	leaf := ca.Issue(t, "127.0.0.1", true)
	addrs := freeAddrs(t, 4) // amqp, amqps, http, raft
	file := fmt.Sprintf(docsConf,
		writeFile(t, dir, "ca.pem", ca.PEM), writeFile(t, dir, "server.pem", leaf.CertPEM), writeFile(t, dir, "server.key", leaf.KeyPEM))
	file = strings.NewReplacer(
		"listeners.tcp.default = 127.0.0.1:0", "listeners.tcp.default = "+addrs[0],
		"listeners.ssl.default = 127.0.0.1:0", "listeners.ssl.default = "+addrs[1],
		"management.tcp.port = 0", "management.tcp.port = "+strings.Split(addrs[2], ":")[1],
	).Replace(file) + `
## Cluster formation: classic peer discovery
cluster_formation.peer_discovery_backend = classic_config
cluster_formation.classic_config.nodes.1 = ` + addrs[3] + "\n"
	conf := writeFile(t, dir, "rabbitmq.conf", []byte(file))
	t.Setenv("WARREN_NODE_ID", "1") // the node is named by address, not by this host's name
	t.Setenv("RABBITMQ_MNESIA_DIR", filepath.Join(dir, "data"))

	ctx, cancel := context.WithCancel(context.Background())
	logs := new(amqptest.SyncBuffer)
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-config", conf}, logs, logs) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	var conn *amqp091.Connection
	var err error
	for time.Now().Before(deadline) {
		if conn, err = amqp091.Dial("amqp://admin:s3cret@" + addrs[0] + "/"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, conn.Config.Heartbeat, "the lower of the server's 5 s and the client's 10 s")
	publishOne(t, conn, "jobs", "replicated")
	require.NoError(t, conn.Close())
	node := nodeInfo(t, addrs[2], "admin", "s3cret")
	require.Equal(t, float64(2e9), node["mem_limit"])
	cancel()
	require.NoError(t, <-done)
	require.Contains(t, logs.String(), `"msg":"warren cluster node"`)
}

// TestClusterNodesByHostName: without -node-id the member is the node
// whose host is this machine's (RabbitMQ finds itself by node name);
// rabbit@host gets RabbitMQ's inter-node port 25672.
func TestClusterNodesByHostName(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	dir := t.TempDir()
	conf := writeFile(t, dir, "rabbitmq.conf", []byte(`cluster_formation.peer_discovery_backend = rabbit_peer_discovery_classic_config
cluster_formation.classic_config.nodes.1 = rabbit@elsewhere
cluster_formation.classic_config.nodes.2 = rabbit@`+host+`
cluster_formation.classic_config.nodes.3 = rabbit@other.example:7003
`))
	got := printConfig(t, "-config", conf)
	require.Equal(t, [2]string{"1=elsewhere:25672,2=" + host + ":25672,3=other.example:7003", "file " + conf + ":2"}, got["peers"])
	require.Equal(t, [2]string{"2", "file " + conf + ":3"}, got["node-id"])

	require.NoError(t, os.WriteFile(conf, []byte("cluster_formation.classic_config.nodes.1 = rabbit@elsewhere\n"), 0o600))
	err = run(context.Background(), []string{"-config", conf, "-print-config"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "none is on this host")
	require.Equal(t, [2]string{"7", "flag"}, printConfig(t, "-config", conf, "-node-id", "7")["node-id"])
}

// TestConfigFileMoreErrors: the keys this file maps refuse bad values by
// line, and the outputs Warren does not have are refused, not ignored.
func TestConfigFileMoreErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ conf, err string }{
		{"log.console.level = loud\n", "line 1: log.console.level:"},
		{"log.console.formatter = xml\n", "line 1: log.console.formatter:"},
		{"log.console = false\n", "cannot be turned off"},
		{"log.file = /var/log/rabbitmq/rabbit.log\n", "log.file may only be false"},
		{"heartbeat = -1\n", "line 1: heartbeat:"},
		{"channel_max = 70000\n", "line 1: channel_max:"},
		{"cluster_formation.peer_discovery_backend = k8s\n", "classic_config.nodes.N only"},
		{"cluster_formation.classic_config.nodes.0 = rabbit@a\n", "above 0"},
		{"cluster_formation.classic_config.nodes.one = rabbit@a\n", "above 0"},
		{"\ncluster_formation.classic_config.nodes.1 = a\n", "line 2: cluster_formation.classic_config.nodes.1:"},
		{"cluster_formation.node_cleanup.interval = 30\n", "line 1: unknown key cluster_formation.node_cleanup.interval"},
	} {
		conf := writeFile(t, dir, "rabbitmq.conf", []byte(tc.conf))
		err := run(context.Background(), []string{"-memory", "-config", conf, "-print-config"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, tc.err, tc.conf)
	}
}

// TestReload: SIGHUP (a value on hup) re-reads the file: the log level,
// the consumer timeout and the memory watermark take effect at once (the
// management API shows the new limit), a changed password is logged as
// needing a restart, and a file that no longer reads changes nothing and
// says so.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	const common = "listeners.tcp.default = 127.0.0.1:0\nmanagement.tcp.ip = 127.0.0.1\nmanagement.tcp.port = 0\n"
	conf := writeFile(t, dir, "rabbitmq.conf", []byte(common+"log.console.level = warning\nconsumer_timeout = 60000\ndefault_pass = one\nvm_memory_high_watermark.absolute = 1GB\n"))
	logs := new(amqptest.SyncBuffer)
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runServer(ctx, []string{"-memory", "-config", conf}, stdoutW, logs, hup)
		stdoutW.Close()
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	rd := bufio.NewReader(stdoutR)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	addr := strings.TrimPrefix(strings.TrimSpace(line), "listening on ")
	line, err = rd.ReadString('\n')
	require.NoError(t, err)
	web := strings.TrimPrefix(strings.TrimSpace(line), "management on ")
	go io.Copy(io.Discard, rd)
	require.NotContains(t, logs.String(), "level=INFO", "warning and above only")
	require.Equal(t, float64(1e9), nodeInfo(t, web, "guest", "one")["mem_limit"])

	reloaded := func(n int) {
		t.Helper()
		hup <- fakeSignal(n)
		require.Eventually(t, func() bool {
			return strings.Count(logs.String(), "reload: done")+strings.Count(logs.String(), "settings not read") >= n
		}, 10*time.Second, 5*time.Millisecond)
	}
	require.NoError(t, os.WriteFile(conf, []byte(common+"log.console.level = debug\nconsumer_timeout = 120000\ndefault_pass = two\nvm_memory_high_watermark.absolute = 2GB\n"), 0o600))
	reloaded(1)
	out := logs.String()
	require.Contains(t, out, `msg="reload: applied" setting=log-level from=warning to=debug source="file `+conf+`:4"`)
	require.Contains(t, out, `msg="reload: applied" setting=memory-high-watermark from=1000000000 to=2000000000`)
	require.Contains(t, out, `msg="reload: applied" setting=consumer-timeout from=1m0s to=2m0s`)
	require.Contains(t, out, `setting=password from=******** to=********`)
	require.NotContains(t, out, "two", "no password in the log")
	require.Equal(t, float64(2e9), nodeInfo(t, web, "guest", "one")["mem_limit"], "the new watermark is in force")

	conn, err := amqp091.Dial("amqp://guest:one@" + addr + "/")
	require.NoError(t, err, "the password of the start still holds")
	require.NoError(t, conn.Close())
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "level=DEBUG") }, 10*time.Second, 5*time.Millisecond,
		"debug logging is on after the reload")

	require.NoError(t, os.WriteFile(conf, []byte("log.console.level = info\nbogus_key = 1\n"), 0o600))
	reloaded(2)
	require.Contains(t, logs.String(), `"reload: settings not read, nothing changed"`)
	require.Contains(t, logs.String(), "line 2: unknown key bogus_key")
}

// fakeSignal is a stand-in signal value for hup (its value is not read).
type fakeSignal int

func (fakeSignal) Signal()          {}
func (s fakeSignal) String() string { return fmt.Sprint("signal ", int(s)) }

// TestUnknownKeysWarn: with -unknown-keys warn a key Warren does not map
// is logged with its line and ignored, and the server starts; the
// default refuses it.
func TestUnknownKeysWarn(t *testing.T) {
	conf := writeFile(t, t.TempDir(), "rabbitmq.conf", []byte("listeners.tcp.default = 127.0.0.1:0\nclustering.partition_handling = autoheal\n"))
	err := run(context.Background(), []string{"-memory", "-config", conf}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "line 2: unknown key clustering.partition_handling")
	err = run(context.Background(), []string{"-memory", "-config", conf, "-unknown-keys", "ignore"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "-unknown-keys is refuse or warn")

	logs := new(amqptest.SyncBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-memory", "-config", conf, "-unknown-keys", "warn"}, stdoutW, logs)
		stdoutW.Close()
	}()
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "listening on "), line)
	go io.Copy(io.Discard, stdoutR)
	cancel()
	require.NoError(t, <-done)
	require.Contains(t, logs.String(), `level=WARN msg="config: key ignored (-unknown-keys warn)" key="`+conf+`: line 2: unknown key clustering.partition_handling"`)
}
