package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. The
// kernel fixes it at 100 on every architecture Go runs on; reading it
// properly (sysconf(_SC_CLK_TCK)) would need cgo.
const clockTicks = 100

// procCPU returns the user+system CPU time pid has used, from fields 14 and
// 15 of /proc/PID/stat (proc(5)).
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("perftest: broker cpu: %w", err)
	}
	return parseStatCPU(raw)
}

func parseStatCPU(raw []byte) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may itself hold
	// spaces and parentheses, so fields are counted from the last ')'.
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 {
		return 0, fmt.Errorf("perftest: /proc stat: no command name in %q", truncate(raw))
	}
	fields := strings.Fields(string(raw[end+1:]))
	// fields[0] is field 3 (state); utime is field 14, stime field 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("perftest: /proc stat: %d fields after the command name, want at least 13", len(fields))
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("perftest: /proc stat: cpu field %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memStatus reads VmRSS (resident now) and VmHWM (peak resident since the
// process started) from /proc/PID/status; pid 0 means this process.
func memStatus(pid int) (rss, hwm uint64, err error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("perftest: rss: %w", err)
	}
	defer f.Close()
	return parseStatus(f)
}

func parseStatus(f interface{ Read([]byte) (int, error) }) (rss, hwm uint64, err error) {
	sc := bufio.NewScanner(f)
	var found int
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(value), " ")
		n, perr := strconv.ParseUint(num, 10, 64)
		if perr != nil || unit != "kB" {
			return 0, 0, fmt.Errorf("perftest: /proc status: bad %s line %q", name, sc.Text())
		}
		if name == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("perftest: /proc status: %w", err)
	}
	if found < 2 {
		return 0, 0, fmt.Errorf("perftest: /proc status: no VmRSS/VmHWM lines")
	}
	return rss, hwm, nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// ioCounts are the read and write system calls a process has made, from
// syscr and syscw of /proc/PID/io (proc(5)); pid 0 means this process.
type ioCounts struct{ reads, writes uint64 }

func procIO(pid int) (ioCounts, error) {
	path := "/proc/self/io"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/io", pid)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return ioCounts{}, fmt.Errorf("perftest: io counts: %w", err)
	}
	return parseIO(raw)
}

func parseIO(raw []byte) (ioCounts, error) {
	var c ioCounts
	var found int
	for _, line := range strings.Split(string(raw), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "syscr" && name != "syscw") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return ioCounts{}, fmt.Errorf("perftest: /proc io: bad %s line %q", name, line)
		}
		if name == "syscr" {
			c.reads = n
		} else {
			c.writes = n
		}
		found++
	}
	if found < 2 {
		return ioCounts{}, fmt.Errorf("perftest: /proc io: no syscr/syscw lines")
	}
	return c, nil
}
