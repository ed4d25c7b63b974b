package rabbitconf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Entry is one "key = value" line of a file.
type Entry struct {
	Key, Value string
	Line       int // 1-based
}

// maxLine bounds one line, so a file without newlines cannot make Parse
// hold it all as one token.
const maxLine = 64 << 10

// Parse reads r's lines. A line is blank, a comment (first non-blank
// character "#"), or key = value with a non-empty key of letters, digits
// and ". _ -"; anything after " #" in a value is a comment, as in
// RabbitMQ's cuttlefish. A value may be wrapped in double quotes.
func Parse(r io.Reader) ([]Entry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLine)
	var out []Entry
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not key = value", n, line)
		}
		key = strings.TrimSpace(key)
		if err := checkKey(key); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if i := strings.Index(value, " #"); i >= 0 {
			value = value[:i]
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
		}
		if value == "" {
			return nil, fmt.Errorf("line %d: %s has no value", n, key)
		}
		out = append(out, Entry{Key: key, Value: value, Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rabbitmq.conf: %w", err)
	}
	return out, nil
}

func checkKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	for _, c := range key {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("key %q has a character other than letters, digits and . _ -", key)
		}
	}
	if strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
		return fmt.Errorf("key %q has an empty part", key)
	}
	return nil
}

// Handler applies one entry; its error is reported with the entry's line.
type Handler func(e Entry) error

// Table maps keys to handlers: exact keys first, then the longest
// registered prefix.
type Table struct {
	exact    map[string]Handler
	prefixes map[string]Handler
}

// Key registers h for key; registering a key twice panics (a programming
// error, found at start).
func (t *Table) Key(key string, h Handler) {
	if t.exact == nil {
		t.exact = map[string]Handler{}
	}
	if _, dup := t.exact[key]; dup {
		panic("rabbitconf: key " + key + " registered twice")
	}
	t.exact[key] = h
}

// Prefix registers h for every key that starts with prefix (which should
// end in "."), such as "auth_backends." for auth_backends.1,
// auth_backends.2, ...
func (t *Table) Prefix(prefix string, h Handler) {
	if t.prefixes == nil {
		t.prefixes = map[string]Handler{}
	}
	if _, dup := t.prefixes[prefix]; dup {
		panic("rabbitconf: prefix " + prefix + " registered twice")
	}
	t.prefixes[prefix] = h
}

// Lookup is the handler for key, or nil.
func (t *Table) Lookup(key string) Handler {
	if h, ok := t.exact[key]; ok {
		return h
	}
	best := ""
	var h Handler
	for p, ph := range t.prefixes {
		if strings.HasPrefix(key, p) && len(p) > len(best) {
			best, h = p, ph
		}
	}
	return h
}

// Apply runs each entry's handler in file order. An entry no handler
// claims goes to unknown; a nil unknown refuses it. Errors carry the
// entry's line number.
func (t *Table) Apply(entries []Entry, unknown func(Entry) error) error {
	for _, e := range entries {
		h := t.Lookup(e.Key)
		if h == nil {
			if unknown == nil {
				return fmt.Errorf("line %d: unknown key %s", e.Line, e.Key)
			}
			if err := unknown(e); err != nil {
				return fmt.Errorf("line %d: %w", e.Line, err)
			}
			continue
		}
		if err := h(e); err != nil {
			return fmt.Errorf("line %d: %s: %w", e.Line, e.Key, err)
		}
	}
	return nil
}

// byteUnits are the memory units RabbitMQ's docs list for
// vm_memory_high_watermark.absolute and disk_free_limit.absolute:
// k/kiB/M/MiB/G/GiB/T/TiB powers of 1024, kB/KB/MB/GB/TB powers of 1000.
var byteUnits = []struct {
	suffix string
	mult   float64
}{
	{"kiB", 1 << 10}, {"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"k", 1 << 10}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
}

// Bytes reads an information unit such as 1073741824, 2GB or 512MiB.
func Bytes(s string) (int64, error) {
	num, mult := s, 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 63)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte count such as 1073741824, 2GB or 512MiB", s)
	}
	v := float64(n) * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(v), nil
}

// Bool reads true or false, as cuttlefish's flag type does.
func Bool(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%q is neither true nor false", s)
}

// Int reads a non-negative integer no larger than max.
func Int(s string, max uint64) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > max {
		return 0, fmt.Errorf("%q is not an integer from 0 to %d", s, max)
	}
	return n, nil
}
