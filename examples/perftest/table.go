package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// metric is one row of the comparison table: how to read it from a result,
// which way is better, and the goal set for the ratio (docs/performance.md).
type metric struct {
	name   string
	unit   string
	get    func(*result) (float64, bool)
	higher bool    // higher is better
	goal   float64 // ratio candidate/baseline to reach; 0: none
	abs    float64 // absolute ceiling for the candidate (idle RSS); 0: none
}

func val(f func(*result) float64) func(*result) (float64, bool) {
	return func(r *result) (float64, bool) { return f(r), true }
}

func opt(f func(*result) *float64) func(*result) (float64, bool) {
	return func(r *result) (float64, bool) {
		if p := f(r); p != nil {
			return *p, true
		}
		return 0, false
	}
}

var (
	mConsumed  = metric{name: "consumed", unit: "msg/s", get: val(func(r *result) float64 { return r.ConsumedPerS }), higher: true, goal: 2}
	mPublished = metric{name: "published", unit: "msg/s", get: val(func(r *result) float64 { return r.PublishedPerS }), higher: true}
	mConfirmed = metric{name: "confirmed", unit: "msg/s", get: val(func(r *result) float64 { return r.ConfirmedPerS }), higher: true, goal: 2}
	mCPU       = metric{name: "broker CPU", unit: "µs/msg", get: opt(func(r *result) *float64 { return r.BrokerCPUUSPerMsg }), goal: 1.0 / 3}
	mClientCPU = metric{name: "client CPU", unit: "µs/msg", get: opt(func(r *result) *float64 { return r.ClientCPUUSPerMsg })}
	mCores     = metric{name: "broker CPU", unit: "cores", get: opt(func(r *result) *float64 { return r.BrokerCPUCores })}
	mRSS       = metric{name: "peak RSS", unit: "MiB", get: opt(func(r *result) *float64 { return r.RSSPeakMiB })}
	mP50       = metric{name: "latency p50", unit: "µs", get: val(func(r *result) float64 { return r.LatencyP50US })}
	mP95       = metric{name: "latency p95", unit: "µs", get: val(func(r *result) float64 { return r.LatencyP95US })}
	mP99       = metric{name: "latency p99", unit: "µs", get: val(func(r *result) float64 { return r.LatencyP99US }), goal: 0.5}
	mMax       = metric{name: "latency max", unit: "µs", get: val(func(r *result) float64 { return r.LatencyMaxUS })}
	mIdle      = metric{name: "RSS idle", unit: "MiB", get: opt(func(r *result) *float64 { return r.RSSStartMiB }), abs: 20}

	// The scale scenario's rows: "ahead on every row" is the goal.
	mOps      = metric{name: "rate", unit: "/s", get: val(func(r *result) float64 { return r.OpsPerS }), higher: true, goal: 1}
	mReady    = metric{name: "ready after start", unit: "s", get: opt(func(r *result) *float64 { return r.ReadyS }), goal: 1}
	mRSSEnd   = metric{name: "RSS after", unit: "MiB", get: opt(func(r *result) *float64 { return r.RSSEndMiB }), goal: 1}
	mPerMsg   = metric{name: "memory per queued message", unit: "B", get: scaled(func(r *result) *float64 { return r.PerItemKiB }, 1024), goal: 1}
	mPerQueue = metric{name: "memory per queue", unit: "KiB", get: opt(func(r *result) *float64 { return r.PerItemKiB }), goal: 1}
	mPerConn  = metric{name: "memory per connection", unit: "KiB", get: opt(func(r *result) *float64 { return r.PerItemKiB }), goal: 1}
	mFlat     = metric{name: "last/first tenth rate", unit: "ratio", get: opt(flatness)}
	mDiskEnd  = metric{name: "data dir after", unit: "MiB", get: opt(func(r *result) *float64 { return r.DiskEndMiB })}
)

func scaled(f func(*result) *float64, by float64) func(*result) (float64, bool) {
	return func(r *result) (float64, bool) {
		if p := f(r); p != nil {
			return *p * by, true
		}
		return 0, false
	}
}

// flatness is the drain rate of its last tenth over its first: 1 is flat.
func flatness(r *result) *float64 {
	if len(r.Windows) < 2 || r.Windows[0].PerS == 0 {
		return nil
	}
	return ptr(r.Windows[len(r.Windows)-1].PerS / r.Windows[0].PerS)
}

func with(m metric, goal float64) metric { m.goal = goal; return m }

// rowsFor lists what the table shows for a scenario, with its goals.
func rowsFor(scenario string) []metric {
	switch scenario {
	case "idle":
		return []metric{mIdle}
	case "transient":
		return []metric{mConsumed, mPublished, mCPU, mClientCPU, with(mRSS, 0.5)}
	case "fanout":
		return []metric{with(mConsumed, 2), mCPU, mClientCPU, mRSS}
	case "persistent-confirm":
		return []metric{mConfirmed, with(mConsumed, 0), with(mCPU, 0), mClientCPU, mRSS}
	case "latency":
		return []metric{mP50, mP95, mP99, mMax, mCores}
	case "get":
		return []metric{mConsumed, with(mCPU, 0)}
	case "many-queues":
		return []metric{mP99, with(mConsumed, 0), with(mCores, 0.5), mRSS}
	case "scale-fill":
		return []metric{with(mConfirmed, 1), with(mRSS, 1), mPerMsg}
	case "scale-ready":
		return []metric{mReady}
	case "scale-drain":
		return []metric{with(mConsumed, 1), with(mRSS, 1), mFlat, mDiskEnd}
	case "scale-declare":
		return []metric{mOps, mRSSEnd, mPerQueue}
	case "scale-publish":
		return []metric{mOps, with(mRSS, 1), with(mPerQueue, 1)}
	case "scale-delete":
		return []metric{mOps}
	case "scale-connections":
		return []metric{mPerConn, with(mOps, 0)}
	}
	return []metric{with(mConsumed, 0), mPublished, with(mCPU, 0), mRSS}
}

type group struct {
	key     string
	title   string               // the row's name when not the key (scale phases)
	results map[string][]*result // by label
}

// printTable reads -json lines (blank lines and lines starting with # are
// skipped) and prints one markdown row per metric with the medians of the
// rounds of each label and their ratio.
func printTable(cfg *config, w io.Writer) error {
	f, err := os.Open(cfg.table)
	if err != nil {
		return fmt.Errorf("perftest: table: %w", err)
	}
	defer f.Close()
	groups, err := readGroups(f)
	if err != nil {
		return err
	}
	return writeTable(w, groups, cfg.baseline, cfg.candidate, !cfg.noGoals)
}

func readGroups(r io.Reader) ([]*group, error) {
	var groups []*group
	byKey := map[string]*group{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		res := new(result)
		if err := json.Unmarshal([]byte(line), res); err != nil {
			return nil, fmt.Errorf("perftest: table: line %d: %w", n, err)
		}
		key := res.Scenario
		switch {
		case res.Title != "":
			// A scale phase: its title names the sizes.
			key = res.Scenario + " " + res.Title
		case res.Scenario != "idle" && res.Scenario != "many-queues" && res.Scenario != "latency":
			key += fmt.Sprintf(" %s", sizeName(res.Size))
		}
		if res.Client != "" {
			key += " (" + res.Client + " client)"
		}
		g := byKey[key]
		if g == nil {
			g = &group{key: key, title: res.Title, results: map[string][]*result{}}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.results[res.Label] = append(g.results[res.Label], res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("perftest: table: %w", err)
	}
	return groups, nil
}

func sizeName(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func median(rs []*result, get func(*result) (float64, bool)) (float64, bool) {
	var vs []float64
	for _, r := range rs {
		if v, ok := get(r); ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], true
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, true
}

// writeTable writes the markdown table of groups, cand against base, with
// the goal and met columns when goals is set.
func writeTable(w io.Writer, groups []*group, base, cand string, goals bool) error {
	bw := bufio.NewWriter(w)
	if goals {
		fmt.Fprintf(bw, "| scenario | metric | %s | %s | %s/%s | goal | met |\n", base, cand, cand, base)
		fmt.Fprintln(bw, "|---|---|---:|---:|---:|---|---|")
	} else {
		fmt.Fprintf(bw, "| scenario | metric | %s | %s | %s/%s |\n", base, cand, cand, base)
		fmt.Fprintln(bw, "|---|---|---:|---:|---:|")
	}
	for _, g := range groups {
		name := g.key
		if g.title != "" {
			name = g.title
		}
		for _, label := range []string{base, cand} {
			if bad := unverified(g.results[label]); bad != "" {
				name += fmt.Sprintf(" (%s: %s)", label, bad)
			}
		}
		for _, m := range rowsFor(strings.Fields(g.key)[0]) {
			b, bok := median(g.results[base], m.get)
			c, cok := median(g.results[cand], m.get)
			ratio, goal, met := "–", "", ""
			// A ratio to or of a negative figure (RSS that shrank: noise
			// in a memory-per-item row) means nothing.
			if bok && cok && b > 0 && c >= 0 {
				r := c / b
				ratio = fmt.Sprintf("%.2f", r)
				if m.goal != 0 {
					if m.higher {
						goal = fmt.Sprintf("≥ %s", trimFloat(m.goal))
						met = yesNo(r >= m.goal)
					} else {
						goal = fmt.Sprintf("≤ %s", trimFloat(m.goal))
						met = yesNo(r <= m.goal)
					}
				}
			}
			if m.abs != 0 && cok {
				goal = fmt.Sprintf("≤ %s %s", trimFloat(m.abs), m.unit)
				met = yesNo(c <= m.abs)
			}
			if !goals {
				fmt.Fprintf(bw, "| %s | %s (%s) | %s | %s | %s |\n",
					name, m.name, m.unit, cell(b, bok), cell(c, cok), ratio)
				name = ""
				continue
			}
			fmt.Fprintf(bw, "| %s | %s (%s) | %s | %s | %s | %s | %s |\n",
				name, m.name, m.unit, cell(b, bok), cell(c, cok), ratio, goal, met)
			name = ""
		}
	}
	return bw.Flush()
}

// unverified says how many of a label's rounds failed verification.
func unverified(rs []*result) string {
	bad := 0
	for _, r := range rs {
		if r.Scenario != "idle" && !r.Verified {
			bad++
		}
	}
	if bad == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d runs NOT verified", bad, len(rs))
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	if math.Abs(v-1.0/3) < 1e-9 {
		return "⅓"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// cell formats a value: thousands separators for big numbers, one or two
// decimals for small ones.
func cell(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	switch {
	case v >= 1000:
		s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}
