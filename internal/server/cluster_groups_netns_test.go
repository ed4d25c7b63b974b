//go:build linux

package server

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/warrenproc"
)

// netnsLab is three network namespaces on one bridge, member i at
// 10.<net>.0.i; a partition takes a member's link to the bridge down, so
// it reaches neither the other members nor the clients (in the test's
// namespace, on the bridge at .254). It needs root and iproute2.
type netnsLab struct {
	t      *testing.T
	prefix string
	subnet string
}

func (l *netnsLab) ip(args ...string) {
	l.t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(l.t, err, "ip %s: %s", strings.Join(args, " "), out)
}

func (l *netnsLab) ns(i int) string   { return fmt.Sprintf("%s-%d", l.prefix, i) }
func (l *netnsLab) host(i int) string { return fmt.Sprintf("%sh%d", l.prefix, i) }
func (l *netnsLab) addr(i int) string { return fmt.Sprintf("%s.%d", l.subnet, i) }

func newNetnsLab(t *testing.T) *netnsLab {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	id := os.Getpid() % 200
	l := &netnsLab{t: t, prefix: fmt.Sprintf("wq%d", id), subnet: fmt.Sprintf("10.%d.0", 50+id)}
	br := l.prefix + "br"
	l.ip("link", "add", br, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", br).Run() })
	l.ip("addr", "add", l.addr(254)+"/24", "dev", br)
	l.ip("link", "set", br, "up")
	for i := 1; i <= 3; i++ {
		ns, h, inner := l.ns(i), l.host(i), fmt.Sprintf("%sn%d", l.prefix, i)
		l.ip("netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		l.ip("link", "add", h, "type", "veth", "peer", "name", inner)
		l.ip("link", "set", inner, "netns", ns)
		l.ip("link", "set", h, "master", br, "up")
		l.ip("-n", ns, "addr", "add", l.addr(i)+"/24", "dev", inner)
		l.ip("-n", ns, "link", "set", inner, "up")
		l.ip("-n", ns, "link", "set", "lo", "up")
	}
	return l
}

// partition cuts member i off (up: heals it).
func (l *netnsLab) partition(i int, cut bool) {
	state := "up"
	if cut {
		state = "down"
	}
	l.ip("link", "set", l.host(i), state)
}

// TestClusterGroupsPartitionInNetns: three server processes with
// -queue-groups, each in a network namespace of its own; member 3, which
// leads a third of 30 quorum queues, is partitioned away (its link down)
// for 5 s (groupFaultRun): its queues resume under leaders on the majority
// side, and it serves again once healed.
func TestClusterGroupsPartitionInNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes in network namespaces")
	}
	lab := newNetnsLab(t)
	bin := warrenproc.Build(t)
	dir := t.TempDir()
	secret := clusterSecret(t, dir)
	var peers []string
	for i := 1; i <= 3; i++ {
		peers = append(peers, fmt.Sprintf("%d=%s:7001", i, lab.addr(i)))
	}
	addrs := make([]string, 3)
	for i := 1; i <= 3; i++ {
		addrs[i-1] = lab.addr(i) + ":5672"
		args := append([]string{"netns", "exec", lab.ns(i), bin, "-node-id", fmt.Sprint(i), "-peers", strings.Join(peers, ","),
			"-addr", addrs[i-1], "-data", filepath.Join(dir, fmt.Sprint(i)), "-queue-groups", "-dead-after", "1s",
			"-allow-remote-guest"}, secret...)
		cmd := exec.Command("ip", args...)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	groupFaultRun(t, addrs, "5 s partition", func() {
		lab.partition(3, true)
		time.Sleep(5 * time.Second)
		lab.partition(3, false)
		back, _ := dialAny(t, addrs[2:3], "")
		publishOne(t, back, "after-heal", "m") // member 3 serves again
		back.Close()
		time.Sleep(time.Second)
	})
}
