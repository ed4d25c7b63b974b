package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/broker/amqp"
)

func main() {
	rawURL := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "AMQP URL of the broker")
	pid := flag.Int("broker-pid", 0, "pid of the broker, to read its RSS and CPU from /proc")
	n := flag.Int("conns", 10000, "connections to open")
	dialers := flag.Int("dialers", 8, "connections opened in parallel")
	idle := flag.Duration("idle", 5*time.Second, "how long to keep them open and idle before measuring")
	sources := flag.String("sources", "", "comma-separated local addresses to dial from, in turn (default: the system's choice)")
	heartbeat := flag.Duration("heartbeat", 0, "heartbeat interval to ask for, in whole seconds (0: accept the broker's)")
	asJSON := flag.Bool("json", false, "print the result as one JSON object")
	flag.Parse()
	if *heartbeat%time.Second != 0 || *heartbeat < 0 {
		fmt.Fprintln(os.Stderr, "connscale: -heartbeat must be a whole number of seconds")
		os.Exit(2)
	}
	if err := run(*rawURL, *pid, *n, *dialers, *idle, *sources, *heartbeat, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "connscale:", err)
		os.Exit(1)
	}
}

// result is what one run measured.
type result struct {
	Conns          int     `json:"conns"`
	OpenSeconds    float64 `json:"open_s"`
	ConnsPerSecond float64 `json:"conns_per_s"`
	RSSBeforeMiB   float64 `json:"rss_before_mib,omitempty"`
	RSSAfterMiB    float64 `json:"rss_after_mib,omitempty"`
	RSSPerConnKiB  float64 `json:"rss_per_conn_kib,omitempty"`
	IdleCPUCores   float64 `json:"idle_cpu_cores,omitempty"`
	HeartbeatS     int     `json:"heartbeat_s"`
}

func run(rawURL string, pid, n, dialers int, idle time.Duration, sources string, heartbeat time.Duration, asJSON bool) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	user, pass := "guest", "guest"
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	vhost := "/"
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		vhost, _ = url.PathUnescape(p)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "5672")
	}
	var locals []net.Addr
	for _, s := range strings.Split(sources, ",") {
		if s = strings.TrimSpace(s); s != "" {
			locals = append(locals, &net.TCPAddr{IP: net.ParseIP(s)})
		}
	}

	var res result
	res.Conns = n
	rssBefore, _ := procRSS(pid)
	conns := make([]net.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	// With a heartbeat of our own, heartbeats go out from the start: at
	// 1 s the broker drops a connection silent for 2 s, less than opening
	// them all takes.
	hb := newHeartbeater(heartbeat)
	defer hb.stop()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, dialers)
	for d := range dialers {
		wg.Go(func() {
			for i := d; i < n; i += dialers {
				dialer := net.Dialer{Timeout: 10 * time.Second}
				if len(locals) > 0 {
					dialer.LocalAddr = locals[i%len(locals)]
				}
				c, err := dialer.Dial("tcp", addr)
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				conns[i] = c
				agreed, err := open(c, user, pass, vhost, uint16(heartbeat/time.Second))
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				if i == 0 {
					res.HeartbeatS = int(agreed)
				}
				hb.add(c)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	res.OpenSeconds = time.Since(start).Seconds()
	res.ConnsPerSecond = float64(n) / res.OpenSeconds

	cpu0, _ := procCPU(pid)
	time.Sleep(idle)
	cpu1, _ := procCPU(pid)
	if err := hb.stop(); err != nil {
		return err
	}
	if pid != 0 {
		rssAfter, err := procRSS(pid)
		if err != nil {
			return err
		}
		res.RSSBeforeMiB = float64(rssBefore) / (1 << 20)
		res.RSSAfterMiB = float64(rssAfter) / (1 << 20)
		res.RSSPerConnKiB = float64(int64(rssAfter)-int64(rssBefore)) / float64(n) / 1024
		res.IdleCPUCores = (cpu1 - cpu0).Seconds() / idle.Seconds()
	}
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("%d connections opened in %.2f s (%.0f/s), heartbeat %d s\n", n, res.OpenSeconds, res.ConnsPerSecond, res.HeartbeatS)
	if pid != 0 {
		fmt.Printf("broker RSS %.1f -> %.1f MiB: %.1f KiB per connection; idle CPU %.3f cores\n",
			res.RSSBeforeMiB, res.RSSAfterMiB, res.RSSPerConnKiB, res.IdleCPUCores)
	}
	return nil
}

// heartbeater sends a heartbeat frame on every connection added to it each
// half interval, from one goroutine, as a client's heartbeat sender would;
// what the broker sends is left unread. With no interval it does nothing.
type heartbeater struct {
	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
	ended chan error
	once  sync.Once
}

func newHeartbeater(interval time.Duration) *heartbeater {
	h := &heartbeater{done: make(chan struct{}), ended: make(chan error, 1)}
	if interval == 0 {
		h.ended <- nil
		return h
	}
	go func() { h.ended <- h.run(interval) }()
	return h
}

func (h *heartbeater) add(c net.Conn) {
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
}

func (h *heartbeater) run(interval time.Duration) error {
	frame := amqp.AppendHeartbeatFrame(nil)
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return nil
		case <-t.C:
		}
		h.mu.Lock()
		conns := h.conns[:len(h.conns):len(h.conns)]
		h.mu.Unlock()
		for i, c := range conns {
			if _, err := c.Write(frame); err != nil {
				return fmt.Errorf("connection %d: heartbeat: %w", i, err)
			}
		}
	}
}

// stop ends the sender and reports why it ended, if it failed first.
func (h *heartbeater) stop() error {
	var err error
	h.once.Do(func() {
		close(h.done)
		err = <-h.ended
	})
	return err
}

// open runs the client side of the handshake on c up to channel.open-ok
// on channel 1, accepting the broker's channel-max and frame-max, and its
// heartbeat unless heartbeat (seconds) is not zero. It returns the
// heartbeat agreed.
func open(c net.Conn, user, pass, vhost string, heartbeat uint16) (uint16, error) {
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return 0, err
	}
	r := amqp.NewFrameReader(bufio.NewReaderSize(c, 512))
	if _, err := c.Write([]byte("AMQP\x00\x00\x09\x01")); err != nil {
		return 0, err
	}
	if _, err := expect[*amqp.ConnectionStart](r); err != nil {
		return 0, err
	}
	out := amqp.AppendMethodFrame(nil, 0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00" + user + "\x00" + pass, Locale: "en_US"})
	if _, err := c.Write(out); err != nil {
		return 0, err
	}
	tune, err := expect[*amqp.ConnectionTune](r)
	if err != nil {
		return 0, err
	}
	if heartbeat == 0 {
		heartbeat = tune.Heartbeat
	}
	out = amqp.AppendMethodFrame(out[:0], 0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax, Heartbeat: heartbeat})
	out = amqp.AppendMethodFrame(out, 0, &amqp.ConnectionOpen{VirtualHost: vhost})
	out = amqp.AppendMethodFrame(out, 1, &amqp.ChannelOpen{})
	if _, err := c.Write(out); err != nil {
		return 0, err
	}
	if _, err := expect[*amqp.ConnectionOpenOk](r); err != nil {
		return 0, err
	}
	if _, err := expect[*amqp.ChannelOpenOk](r); err != nil {
		return 0, err
	}
	return heartbeat, c.SetDeadline(time.Time{})
}

// expect reads frames, skipping heartbeats, until a method, which must be
// an M.
func expect[M amqp.Method](r *amqp.FrameReader) (M, error) {
	var zero M
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return zero, err
		}
		if f.Type == amqp.FrameHeartbeat {
			continue
		}
		if f.Type != amqp.FrameMethod {
			return zero, fmt.Errorf("frame type %d, want a method", f.Type)
		}
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			return zero, err
		}
		if cl, ok := m.(*amqp.ConnectionClose); ok {
			return zero, fmt.Errorf("broker closed the connection: %d %s", cl.ReplyCode, cl.ReplyText)
		}
		want, ok := m.(M)
		if !ok {
			return zero, fmt.Errorf("got %s, want %T", m.Name(), zero)
		}
		return want, nil
	}
}

// procRSS is pid's VmRSS in bytes; 0 without a pid.
func procRSS(pid int) (uint64, error) {
	if pid == 0 {
		return 0, nil
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// procCPU is pid's user+system CPU time, from /proc/PID/stat (fields 14
// and 15, in USER_HZ ticks of 1/100 s).
func procCPU(pid int) (time.Duration, error) {
	if pid == 0 {
		return 0, nil
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		t, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += t
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
