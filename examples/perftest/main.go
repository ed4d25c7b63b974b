package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		if !errors.Is(err, errNotVerified) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}

// maxSize bounds -size so a typo cannot allocate the machine away.
const maxSize = 128 << 20

// errNotVerified is returned after the result is printed when messages
// were lost, duplicated or not confirmed.
var errNotVerified = errors.New("perftest: run not verified")

type config struct {
	url           string
	inprocess     string
	memory        bool
	dataDir       string
	scenario      string
	client        string
	size          int
	duration      time.Duration
	rate          int
	connections   int
	queues        int
	queueType     string
	count         int
	inflight      int
	confirmWindow int
	prefetch      int
	brokerPID     int
	// morePIDs are the pids after the first of a comma-separated
	// -broker-pid (a cluster's other members): their CPU is added to the
	// first's; RSS is the first's.
	morePIDs     []int
	json         bool
	label        string
	cpuprofile   string
	memprofile   string
	drainTimeout time.Duration
	dupGrace     time.Duration
	table        string
	baseline     string
	candidate    string
	noGoals      bool
	phases       string
	settle       time.Duration
	du           string
	keep         bool
}

// pidsFlag parses -broker-pid: one pid, or several separated by commas.
type pidsFlag struct {
	first *int
	more  *[]int
}

func (f pidsFlag) String() string {
	if f.first == nil || *f.first == 0 {
		return "0"
	}
	s := strconv.Itoa(*f.first)
	for _, p := range *f.more {
		s += "," + strconv.Itoa(p)
	}
	return s
}

func (f pidsFlag) Set(v string) error {
	var pids []int
	for _, part := range strings.Split(v, ",") {
		p, err := strconv.Atoi(part)
		if err != nil {
			return fmt.Errorf("want a pid or comma-separated pids, got %q", part)
		}
		pids = append(pids, p)
	}
	*f.first, *f.more = pids[0], pids[1:]
	return nil
}

// inprocessFlag lets -inprocess stand alone (meaning dial) or take a value.
type inprocessFlag struct{ v *string }

func (f inprocessFlag) String() string {
	if f.v == nil {
		return ""
	}
	return *f.v
}

func (f inprocessFlag) Set(s string) error {
	switch s {
	case "true", "dial":
		*f.v = "dial"
	case "false", "":
		*f.v = ""
	case "tcp", "direct":
		*f.v = s
	default:
		return fmt.Errorf("want dial, tcp or direct, got %q", s)
	}
	return nil
}

func (inprocessFlag) IsBoolFlag() bool { return true }

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("perftest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.url, "url", defaultURL, "AMQP URL of the broker to measure; several, comma-separated (a cluster's members), spread the queues: queue i's publisher and consumers connect to URL i mod their count")
	fs.Var(inprocessFlag{&cfg.inprocess}, "inprocess", "measure a Warren in this process: dial (Broker.Dial, the default when given alone), tcp (a loopback listener) or direct")
	fs.BoolVar(&cfg.memory, "memory", false, "in-process: keep durable queues in memory too (confirms then mean nothing is synced)")
	fs.StringVar(&cfg.dataDir, "data", "", "in-process: Pebble directory for durable queues (default: a temporary directory, removed afterwards)")
	fs.StringVar(&cfg.scenario, "scenario", "transient", fmt.Sprintf("one of %v", scenarios))
	fs.StringVar(&cfg.client, "client", "amqp091", "amqp091 (amqp091-go) or raw: pre-encoded publishes, 256 per write, and a consumer that only counts deliveries (transient and fanout; -url or -inprocess=tcp)")
	fs.IntVar(&cfg.size, "size", 12, "message body size in bytes (at least 12)")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long publishers publish")
	fs.IntVar(&cfg.rate, "rate", 0, "messages/s per publisher (default: latency 1000, many-queues 100, others unlimited)")
	fs.IntVar(&cfg.connections, "connections", 0, "many-queues: connections, each with its own queue (default 50); scale: idle connections (default 100)")
	fs.IntVar(&cfg.queues, "queues", 0, "fanout: queues bound to the exchange (default 8); persistent-confirm: queues, each with a publisher and a consumer of its own (default 1); scale: durable queues (default 1000)")
	fs.StringVar(&cfg.queueType, "queue-type", "", "x-queue-type of the queues the streaming scenarios declare (e.g. quorum; default: none, the broker's own)")
	fs.IntVar(&cfg.count, "count", 20000, "get: messages to drain; scale: messages in the deep queue")
	fs.IntVar(&cfg.inflight, "inflight", 10000, "most messages per queue published but not yet consumed")
	fs.IntVar(&cfg.confirmWindow, "confirm-window", 256, "persistent-confirm: most unconfirmed messages")
	fs.IntVar(&cfg.prefetch, "prefetch", 100, "persistent-confirm: basic.qos prefetch count")
	fs.Var(pidsFlag{&cfg.brokerPID, &cfg.morePIDs}, "broker-pid", "pid of the broker behind -url, to read its CPU and RSS from /proc; several, comma-separated (a cluster's members): broker CPU is their sum, RSS the first's")
	fs.BoolVar(&cfg.json, "json", false, "print the result as one JSON object")
	fs.StringVar(&cfg.label, "label", "", "name for this broker in -json output (e.g. warren, rabbitmq)")
	fs.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write a CPU profile of this process (the broker too, when -inprocess) to this file")
	fs.StringVar(&cfg.memprofile, "memprofile", "", "after the run and its cleanup, write a heap profile of this process to this file (with -inprocess: what the broker still holds once the run's queues are deleted)")
	fs.DurationVar(&cfg.drainTimeout, "drain-timeout", 30*time.Second, "give up when deliveries and confirms stop moving for this long")
	fs.DurationVar(&cfg.dupGrace, "dup-grace", 100*time.Millisecond, "after the last expected delivery, wait this long for duplicates")
	fs.StringVar(&cfg.table, "table", "", "read -json lines from this file and print a markdown comparison instead of running")
	fs.StringVar(&cfg.baseline, "baseline", "rabbitmq", "-table: label of the reference broker")
	fs.StringVar(&cfg.candidate, "candidate", "warren", "-table: label of the broker compared with it")
	fs.BoolVar(&cfg.noGoals, "no-goals", false, "-table: leave out the goal and met columns (the goals are Warren's against RabbitMQ; a table of two Warren builds has none)")
	fs.StringVar(&cfg.phases, "phases", strings.Join(scalePhases, ","), "scale: the phases to run, comma-separated, in this order")
	fs.DurationVar(&cfg.settle, "settle", 2*time.Second, "scale: pause before each RSS reading that memory per item is computed from")
	fs.StringVar(&cfg.du, "du", "", "scale: the broker's data directory, whose size on disk the drain reports (in-process: the -data directory)")
	fs.BoolVar(&cfg.keep, "keep", false, "leave the run's queues and exchanges declared afterwards, to inspect what they still hold")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("perftest: unexpected arguments %q", fs.Args())
	}
	var errs []error
	if cfg.size < headerSize {
		errs = append(errs, fmt.Errorf("perftest: -size %d: at least %d bytes (sequence number and timestamp)", cfg.size, headerSize))
	}
	if cfg.size > maxSize {
		errs = append(errs, fmt.Errorf("perftest: -size %d: at most %d bytes (RabbitMQ's default max_message_size)", cfg.size, maxSize))
	}
	if cfg.duration <= 0 {
		errs = append(errs, fmt.Errorf("perftest: -duration must be positive"))
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"rate", cfg.rate}, {"connections", cfg.connections}, {"queues", cfg.queues}, {"broker-pid", cfg.brokerPID}, {"broker-pid", slices.Min(append([]int{0}, cfg.morePIDs...))}} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("perftest: -%s must not be negative", v.name))
		}
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"count", cfg.count}, {"inflight", cfg.inflight}, {"confirm-window", cfg.confirmWindow}, {"prefetch", cfg.prefetch}} {
		if v.n <= 0 {
			errs = append(errs, fmt.Errorf("perftest: -%s must be positive", v.name))
		}
	}
	if cfg.prefetch > 65535 {
		errs = append(errs, fmt.Errorf("perftest: -prefetch %d does not fit basic.qos's 16 bits", cfg.prefetch))
	}
	if cfg.drainTimeout <= 0 {
		errs = append(errs, fmt.Errorf("perftest: -drain-timeout must be positive"))
	}
	switch cfg.client {
	case "amqp091":
	case "raw":
		if cfg.inprocess != "" && cfg.inprocess != "tcp" {
			errs = append(errs, fmt.Errorf("perftest: -client raw needs a TCP broker: -url or -inprocess=tcp"))
		}
		if cfg.table == "" && cfg.scenario != "transient" && cfg.scenario != "fanout" {
			errs = append(errs, fmt.Errorf("perftest: -client raw runs the transient and fanout scenarios, not %s", cfg.scenario))
		}
	default:
		errs = append(errs, fmt.Errorf("perftest: -client %q: want amqp091 or raw", cfg.client))
	}
	if strings.Contains(cfg.url, ",") && (cfg.inprocess != "" || cfg.client == "raw") {
		errs = append(errs, fmt.Errorf("perftest: several -url are for the amqp091 client against brokers outside this process"))
	}
	if cfg.inprocess != "" && cfg.brokerPID != 0 {
		errs = append(errs, fmt.Errorf("perftest: -broker-pid is for -url; in-process the broker is this process"))
	}
	if cfg.scenario == "scale" {
		cfg.queues = orDefault(cfg.queues, 1000)
		cfg.connections = orDefault(cfg.connections, 100)
		if _, err := parsePhases(cfg.phases); err != nil {
			errs = append(errs, err)
		}
		if cfg.settle < 0 {
			errs = append(errs, fmt.Errorf("perftest: -settle must not be negative"))
		}
	}
	if cfg.table == "" && cfg.scenario != "get" && cfg.scenario != "scale" {
		if _, err := specFor(cfg); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// run is main without the process: it parses args, runs one scenario (or
// prints a -table) and reports to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.table != "" {
		return printTable(cfg, stdout)
	}
	tgt, err := openTarget(cfg)
	if err != nil {
		return err
	}
	defer tgt.close()

	if cfg.cpuprofile != "" {
		f, err := os.Create(cfg.cpuprofile)
		if err != nil {
			return fmt.Errorf("perftest: cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("perftest: cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	var results []*result
	switch cfg.scenario {
	case "get":
		res, err := runGet(ctx, cfg, tgt)
		if err != nil {
			return err
		}
		results = []*result{res}
	case "scale":
		// The phases that ran are reported even when a later one failed.
		results, err = runScale(ctx, cfg, tgt)
	default:
		run := runStreams
		if cfg.client == "raw" {
			run = runRaw
		}
		res, err := run(ctx, cfg, tgt)
		if err != nil {
			return err
		}
		results = []*result{res}
	}
	verified := err == nil
	for _, res := range results {
		if cfg.json {
			if err := json.NewEncoder(stdout).Encode(res); err != nil {
				return fmt.Errorf("perftest: %w", err)
			}
		} else {
			res.writeText(stdout)
		}
		verified = verified && res.Verified
	}
	if err != nil {
		return err
	}
	if cfg.memprofile != "" {
		if err := writeHeapProfile(cfg.memprofile); err != nil {
			return err
		}
	}
	if !verified {
		return errNotVerified
	}
	return nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("perftest: memprofile: %w", err)
	}
	// A collection first, so the profile shows what is live rather than
	// what has not been swept yet.
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("perftest: memprofile: %w", err)
	}
	return f.Close()
}
