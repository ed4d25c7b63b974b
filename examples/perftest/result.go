package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// result is what one run reports; -json prints it as one line.
type result struct {
	Label    string `json:"label,omitempty"`
	Target   string `json:"target"`
	Scenario string `json:"scenario"`
	// Client is "raw" for -client raw, empty for amqp091-go.
	Client    string  `json:"client,omitempty"`
	Size      int     `json:"size"`
	DurationS float64 `json:"duration_s"`

	Connections   int `json:"connections"`
	Queues        int `json:"queues"`
	Rate          int `json:"rate_per_publisher,omitempty"`
	ConfirmWindow int `json:"confirm_window,omitempty"`
	Prefetch      int `json:"prefetch,omitempty"`
	Inflight      int `json:"inflight_per_queue"`

	Published uint64 `json:"published"`
	Confirmed uint64 `json:"confirmed"`
	Nacked    uint64 `json:"nacked"`
	Consumed  uint64 `json:"consumed"`
	Lost      uint64 `json:"lost"`
	// LostConfirmed counts confirmed messages never delivered: the loss
	// that breaks a promise. Lost also counts unconfirmed ones, whose
	// outcome a 541 left unknown.
	LostConfirmed uint64 `json:"lost_confirmed"`
	Duplicates    uint64 `json:"duplicates"`
	Malformed     uint64 `json:"malformed"`
	Reordered     uint64 `json:"reordered"`

	PublishedPerS float64 `json:"published_per_s"`
	ConfirmedPerS float64 `json:"confirmed_per_s"`
	ConsumedPerS  float64 `json:"consumed_per_s"`

	LatencyP50US float64 `json:"latency_p50_us"`
	LatencyP95US float64 `json:"latency_p95_us"`
	LatencyP99US float64 `json:"latency_p99_us"`
	LatencyMaxUS float64 `json:"latency_max_us"`

	// BrokerCPUS is nil when the broker's CPU cannot be read (a remote
	// broker without -broker-pid).
	BrokerCPUS        *float64 `json:"broker_cpu_s,omitempty"`
	BrokerCPUUSPerMsg *float64 `json:"broker_cpu_us_per_msg,omitempty"`
	BrokerCPUCores    *float64 `json:"broker_cpu_cores,omitempty"`
	CPUSource         string   `json:"cpu_source,omitempty"`
	ClientCPUS        float64  `json:"client_cpu_s"`
	ClientCPUUSPerMsg *float64 `json:"client_cpu_us_per_msg,omitempty"`
	// Read and write system calls per consumed message (syscr, syscw of
	// /proc/PID/io): the client's (this process, every connection), and
	// the broker's when -broker-pid gives it.
	ClientReadsPerMsg  *float64 `json:"client_reads_per_msg,omitempty"`
	ClientWritesPerMsg *float64 `json:"client_writes_per_msg,omitempty"`
	BrokerReadsPerMsg  *float64 `json:"broker_reads_per_msg,omitempty"`
	BrokerWritesPerMsg *float64 `json:"broker_writes_per_msg,omitempty"`

	RSSStartMiB *float64 `json:"rss_start_mib,omitempty"`
	RSSPeakMiB  *float64 `json:"rss_peak_mib,omitempty"`
	RSSHWMMiB   *float64 `json:"rss_hwm_mib,omitempty"`

	// The scale scenario's phases (scale.go).
	Title        string        `json:"title,omitempty"`
	Items        int           `json:"items,omitempty"`
	OpsPerS      float64       `json:"ops_per_s,omitempty"`
	ReadyS       *float64      `json:"ready_s,omitempty"`
	RSSEndMiB    *float64      `json:"rss_end_mib,omitempty"`
	PerItemKiB   *float64      `json:"per_item_kib,omitempty"`
	Windows      []scaleWindow `json:"windows,omitempty"`
	DiskStartMiB *float64      `json:"disk_start_mib,omitempty"`
	DiskEndMiB   *float64      `json:"disk_end_mib,omitempty"`

	Verified bool     `json:"verified"`
	Errors   []string `json:"errors,omitempty"`
}

func newResult(cfg *config, tgt *target) *result {
	return &result{
		Label:     cfg.label,
		Target:    tgt.describe,
		Scenario:  cfg.scenario,
		Size:      cfg.size,
		DurationS: cfg.duration.Seconds(),
		Inflight:  cfg.inflight,
		CPUSource: tgt.cpuSource,
	}
}

func perSecond(n uint64, nanos int64) float64 {
	if nanos <= 0 {
		return 0
	}
	return float64(n) / (float64(nanos) / 1e9)
}

// setRates divides each count by the time from the start of publishing to
// the last event of its kind: publishing stops at -duration, the last
// confirm and the last delivery come later.
func (r *result) setRates(pub, conf, cons int64) {
	r.PublishedPerS = perSecond(r.Published, pub)
	r.ConfirmedPerS = perSecond(r.Confirmed, conf)
	r.ConsumedPerS = perSecond(r.Consumed, cons)
}

func micros(d time.Duration) float64 { return float64(d) / 1e3 }

func (r *result) setLatency(h *histogram) {
	r.LatencyP50US = micros(h.quantile(0.50))
	r.LatencyP95US = micros(h.quantile(0.95))
	r.LatencyP99US = micros(h.quantile(0.99))
	r.LatencyMaxUS = micros(time.Duration(h.max))
}

func ptr(v float64) *float64 { return &v }

const mib = 1 << 20

// setResources reports CPU per consumed message (per delivery: a fanout
// message counts once per queue; for get, per get) over the measured window.
func (r *result) setResources(c cpuSample, m memSample, window int64) {
	r.ClientCPUS = c.client.Seconds()
	if r.Consumed > 0 {
		n := float64(r.Consumed)
		r.ClientCPUUSPerMsg = ptr(micros(c.client) / n)
		if c.clientIOOK {
			r.ClientReadsPerMsg = ptr(float64(c.clientIO.reads) / n)
			r.ClientWritesPerMsg = ptr(float64(c.clientIO.writes) / n)
		}
		if c.brokerIOOK {
			r.BrokerReadsPerMsg = ptr(float64(c.brokerIO.reads) / n)
			r.BrokerWritesPerMsg = ptr(float64(c.brokerIO.writes) / n)
		}
	}
	if c.brokerOK {
		r.BrokerCPUS = ptr(c.broker.Seconds())
		if r.Consumed > 0 {
			r.BrokerCPUUSPerMsg = ptr(micros(c.broker) / float64(r.Consumed))
		}
		if window > 0 {
			r.BrokerCPUCores = ptr(float64(c.broker) / float64(window))
		}
	}
	if m.ok {
		r.RSSStartMiB = ptr(float64(m.start) / mib)
		r.RSSPeakMiB = ptr(float64(m.peak) / mib)
		r.RSSHWMMiB = ptr(float64(m.hwm) / mib)
	}
}

// verify decides whether the run counts: every published message delivered
// exactly once to every queue it was routed to, every confirm an ack, and no
// error on the way. Reordering is reported but allowed.
func (r *result) verify(confirms bool) {
	ok := len(r.Errors) == 0 && r.Lost == 0 && r.Duplicates == 0 && r.Malformed == 0 && r.Nacked == 0
	if confirms && r.Confirmed != r.Published {
		ok = false
	}
	r.Verified = ok
}

func (r *result) problems() string {
	var p []string
	if r.Lost > 0 {
		p = append(p, fmt.Sprintf("%d lost (%d of them confirmed)", r.Lost, r.LostConfirmed))
	}
	if r.Duplicates > 0 {
		p = append(p, fmt.Sprintf("%d duplicated", r.Duplicates))
	}
	if r.Malformed > 0 {
		p = append(p, fmt.Sprintf("%d malformed", r.Malformed))
	}
	if r.Nacked > 0 {
		p = append(p, fmt.Sprintf("%d nacked", r.Nacked))
	}
	if r.ConfirmWindow > 0 && r.Confirmed+r.Nacked < r.Published {
		p = append(p, fmt.Sprintf("%d confirms missing", r.Published-r.Confirmed-r.Nacked))
	}
	p = append(p, r.Errors...)
	return strings.Join(p, "; ")
}

func (r *result) writeText(w io.Writer) {
	if r.Title != "" {
		r.writeScaleText(w)
		return
	}
	client := ""
	if r.Client != "" {
		client = " (" + r.Client + " client)"
	}
	fmt.Fprintf(w, "scenario %s%s, %d B bodies, %v, against %s\n", r.Scenario, client, r.Size, time.Duration(r.DurationS*1e9), r.Target)
	fmt.Fprintf(w, "  %d connections, %d queues", r.Connections, r.Queues)
	if r.Rate > 0 {
		fmt.Fprintf(w, ", %d msg/s per publisher", r.Rate)
	}
	if r.ConfirmWindow > 0 {
		fmt.Fprintf(w, ", confirm window %d", r.ConfirmWindow)
	}
	if r.Prefetch > 0 {
		fmt.Fprintf(w, ", prefetch %d", r.Prefetch)
	}
	fmt.Fprintln(w)
	if r.PublishedPerS > 0 {
		fmt.Fprintf(w, "  published  %10d  %12.0f msg/s\n", r.Published, r.PublishedPerS)
	} else {
		fmt.Fprintf(w, "  published  %10d  (before the clock started)\n", r.Published)
	}
	if r.ConfirmWindow > 0 {
		fmt.Fprintf(w, "  confirmed  %10d  %12.0f msg/s\n", r.Confirmed, r.ConfirmedPerS)
	}
	fmt.Fprintf(w, "  consumed   %10d  %12.0f msg/s\n", r.Consumed, r.ConsumedPerS)
	fmt.Fprintf(w, "  latency    p50 %.0f µs  p95 %.0f µs  p99 %.0f µs  max %.0f µs\n",
		r.LatencyP50US, r.LatencyP95US, r.LatencyP99US, r.LatencyMaxUS)
	if r.BrokerCPUS != nil {
		fmt.Fprintf(w, "  broker CPU %.2f s", *r.BrokerCPUS)
		if r.BrokerCPUUSPerMsg != nil {
			fmt.Fprintf(w, ", %.1f µs/msg", *r.BrokerCPUUSPerMsg)
		}
		if r.BrokerCPUCores != nil {
			fmt.Fprintf(w, ", %.0f %% of a core", 100**r.BrokerCPUCores)
		}
		fmt.Fprintf(w, " (%s)\n", r.CPUSource)
	} else {
		fmt.Fprintln(w, "  broker CPU unknown (give -broker-pid)")
	}
	fmt.Fprintf(w, "  client CPU %.2f s", r.ClientCPUS)
	if r.ClientCPUUSPerMsg != nil {
		fmt.Fprintf(w, ", %.1f µs/msg", *r.ClientCPUUSPerMsg)
	}
	fmt.Fprintln(w)
	if r.ClientReadsPerMsg != nil {
		fmt.Fprintf(w, "  syscalls   client %.3f reads, %.3f writes per message", *r.ClientReadsPerMsg, *r.ClientWritesPerMsg)
		if r.BrokerReadsPerMsg != nil {
			fmt.Fprintf(w, "; broker %.3f reads, %.3f writes", *r.BrokerReadsPerMsg, *r.BrokerWritesPerMsg)
		}
		fmt.Fprintln(w)
	}
	if r.RSSPeakMiB != nil {
		fmt.Fprintf(w, "  RSS        %.1f MiB at start, %.1f MiB peak during the run, VmHWM %.1f MiB\n",
			*r.RSSStartMiB, *r.RSSPeakMiB, *r.RSSHWMMiB)
	}
	if r.Reordered > 0 {
		fmt.Fprintf(w, "  reordered  %d (allowed)\n", r.Reordered)
	}
	if r.Verified {
		fmt.Fprintln(w, "  verified   yes: every message counted exactly once")
	} else {
		fmt.Fprintf(w, "  verified   NO: %s\n", r.problems())
	}
}

type cpuSample struct {
	broker   time.Duration
	brokerOK bool
	client   time.Duration

	clientIO, brokerIO     ioCounts
	clientIOOK, brokerIOOK bool
}

type memSample struct {
	ok               bool
	start, peak, hwm uint64
}

// meter measures the broker's CPU over the run and samples its RSS every
// 20 ms, since VmHWM only knows the peak since the process started.
type meter struct {
	tgt     *target
	cpu0    time.Duration
	cpuOK   bool
	client0 time.Duration
	// io0 and brokerIO0 are the syscall counts at the start; ioPID is
	// whose /proc io the broker's are read from (-1: nobody's, and
	// in-process runs count none: the process is client and broker).
	io0, brokerIO0   ioCounts
	ioOK, brokerIOOK bool
	ioPID            int

	stopOnce sync.Once
	quit     chan struct{}
	done     chan struct{}
	mem      memSample
}

func startMeter(tgt *target) *meter {
	m := &meter{tgt: tgt, client0: selfCPU(), quit: make(chan struct{}), done: make(chan struct{})}
	if tgt.cpu != nil {
		if c, err := tgt.cpu(); err == nil {
			m.cpu0, m.cpuOK = c, true
		}
	}
	m.ioPID = -1
	if tgt.memPID > 0 {
		m.ioPID = tgt.memPID
	}
	if tgt.memPID != 0 {
		m.io0, m.ioOK = mustIO(0)
	}
	if m.ioPID > 0 {
		m.brokerIO0, m.brokerIOOK = mustIO(m.ioPID)
	}
	if tgt.memPID >= 0 {
		if rss, _, err := memStatus(tgt.memPID); err == nil {
			m.mem = memSample{ok: true, start: rss, peak: rss}
		}
	}
	go m.sample()
	return m
}

func (m *meter) sample() {
	defer close(m.done)
	if !m.mem.ok {
		return
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-m.quit:
			return
		case <-t.C:
			if rss, _, err := memStatus(m.tgt.memPID); err == nil {
				m.mem.peak = max(m.mem.peak, rss)
			}
		}
	}
}

func (m *meter) cpu() cpuSample {
	s := cpuSample{client: selfCPU() - m.client0}
	if m.ioOK {
		if c, ok := mustIO(0); ok {
			s.clientIO, s.clientIOOK = c.minus(m.io0), true
		}
	}
	if m.brokerIOOK {
		if c, ok := mustIO(m.ioPID); ok {
			s.brokerIO, s.brokerIOOK = c.minus(m.brokerIO0), true
		}
	}
	if m.cpuOK {
		if c, err := m.tgt.cpu(); err == nil {
			s.broker, s.brokerOK = c-m.cpu0, true
		}
	}
	return s
}

func mustIO(pid int) (ioCounts, bool) {
	c, err := procIO(pid)
	return c, err == nil
}

func (c ioCounts) minus(o ioCounts) ioCounts {
	return ioCounts{reads: c.reads - o.reads, writes: c.writes - o.writes}
}

// stop ends sampling and returns the memory figures; safe to call twice.
func (m *meter) stop() memSample {
	m.stopOnce.Do(func() {
		close(m.quit)
		<-m.done
		if m.mem.ok {
			if rss, hwm, err := memStatus(m.tgt.memPID); err == nil {
				m.mem.peak = max(m.mem.peak, rss)
				m.mem.hwm = hwm
			}
		}
	})
	return m.mem
}
