package promtest

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// Family is one parsed metric family.
type Family struct {
	Type    string
	Help    string
	Samples map[string]float64 // canonical label set (sorted name="value" pairs) -> value
}

var (
	promMetricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	promLabelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// Parse parses the Prometheus text exposition format (0.0.4) strictly:
// it rejects what a lenient scraper would let pass, so the test catches
// sloppy output. Rules checked: the body ends in a newline and has no
// blank lines; HELP and TYPE appear at most once per family and before its
// samples; types are the five the format defines; names and label names
// are valid; label values use only the three escapes; a family's samples
// are contiguous; no series repeats; values are floats (or ±Inf, NaN);
// counters are non-negative and named *_total; every sample belongs to a
// TYPEd family.
func Parse(body string) (map[string]*Family, error) {
	if !strings.HasSuffix(body, "\n") {
		return nil, fmt.Errorf("the exposition does not end with a newline")
	}
	fams := map[string]*Family{}
	done := map[string]bool{} // families whose samples ended
	current := ""
	family := func(name string) *Family {
		f, ok := fams[name]
		if !ok {
			f = &Family{Samples: map[string]float64{}}
			fams[name] = f
		}
		return f
	}
	for i, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", i+1, line, fmt.Sprintf(format, args...))
		}
		if line == "" {
			return nil, fail("blank line")
		}
		if strings.HasPrefix(line, "#") {
			parts := strings.SplitN(line, " ", 4)
			if len(parts) < 3 || (parts[1] != "HELP" && parts[1] != "TYPE") {
				continue // a plain comment
			}
			name := parts[2]
			if !promMetricName.MatchString(name) {
				return nil, fail("bad metric name")
			}
			f := family(name)
			if len(f.Samples) > 0 {
				return nil, fail("%s after samples", parts[1])
			}
			if len(parts) != 4 {
				return nil, fail("%s without text", parts[1])
			}
			if parts[1] == "HELP" {
				if f.Help != "" {
					return nil, fail("second HELP")
				}
				f.Help = parts[3]
				continue
			}
			if f.Type != "" {
				return nil, fail("second TYPE")
			}
			switch parts[3] {
			case "counter", "gauge", "histogram", "summary", "untyped":
			default:
				return nil, fail("unknown type")
			}
			f.Type = parts[3]
			continue
		}
		name, labels, rest, err := parsePromSample(line)
		if err != nil {
			return nil, fail("%v", err)
		}
		f, ok := fams[name]
		if !ok || f.Type == "" {
			return nil, fail("sample without TYPE")
		}
		if name != current {
			if done[name] {
				return nil, fail("samples of %s are not contiguous", name)
			}
			if current != "" {
				done[current] = true
			}
			current = name
		}
		fields := strings.Fields(rest)
		if len(fields) != 1 && len(fields) != 2 {
			return nil, fail("want value [timestamp]")
		}
		v, err := parsePromValue(fields[0])
		if err != nil {
			return nil, fail("%v", err)
		}
		if len(fields) == 2 {
			if _, err := strconv.ParseInt(fields[1], 10, 64); err != nil {
				return nil, fail("bad timestamp")
			}
		}
		if f.Type == "counter" && !(v >= 0) {
			return nil, fail("negative counter")
		}
		if f.Type == "counter" && !strings.HasSuffix(name, "_total") {
			return nil, fail("counter names end in _total")
		}
		if _, dup := f.Samples[labels]; dup {
			return nil, fail("duplicate series")
		}
		f.Samples[labels] = v
	}
	return fams, nil
}

// parsePromSample splits name{labels} and the rest, unescaping label
// values; labels come back canonical: sorted name="value" pairs.
func parsePromSample(line string) (name, labels, rest string, err error) {
	end := strings.IndexAny(line, "{ ")
	if end <= 0 {
		return "", "", "", errors.New("no value")
	}
	name, rest = line[:end], line[end:]
	if !promMetricName.MatchString(name) {
		return "", "", "", errors.New("bad metric name")
	}
	var pairs []string
	if rest[0] == '{' {
		i := 1
		seen := map[string]bool{}
		at := func(i int) (byte, error) {
			if i >= len(rest) {
				return 0, errors.New("unterminated labels")
			}
			return rest[i], nil
		}
		for {
			c, err := at(i)
			if err != nil {
				return "", "", "", err
			}
			if c == '}' {
				i++
				break
			}
			eq := strings.IndexByte(rest[i:], '=')
			if eq <= 0 {
				return "", "", "", errors.New("label without =")
			}
			ln := rest[i : i+eq]
			if !promLabelName.MatchString(ln) || seen[ln] {
				return "", "", "", fmt.Errorf("bad or repeated label name %q", ln)
			}
			seen[ln] = true
			i += eq + 1
			if c, err := at(i); err != nil || c != '"' {
				return "", "", "", errors.New("label value not quoted")
			}
			i++
			var val strings.Builder
			for {
				c, err := at(i)
				if err != nil {
					return "", "", "", err
				}
				if c == '"' {
					break
				}
				if c == '\\' {
					i++
					e, err := at(i)
					if err != nil {
						return "", "", "", err
					}
					switch e {
					case '\\':
						val.WriteByte('\\')
					case '"':
						val.WriteByte('"')
					case 'n':
						val.WriteByte('\n')
					default:
						return "", "", "", fmt.Errorf("bad escape \\%c", e)
					}
				} else {
					val.WriteByte(c)
				}
				i++
			}
			i++
			pairs = append(pairs, ln+"="+strconv.Quote(val.String()))
			if c, err := at(i); err == nil && c == ',' {
				i++
			}
		}
		rest = rest[i:]
	}
	if !strings.HasPrefix(rest, " ") {
		return "", "", "", errors.New("no space before the value")
	}
	sort.Strings(pairs)
	return name, strings.Join(pairs, ","), rest[1:], nil
}

func parsePromValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

// Scrape serves h, GETs /metrics from it, checks the status and content
// type, and parses the body strictly (Parse).
func Scrape(t testing.TB, h http.Handler) map[string]*Family {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/plain; version=0.0.4; charset=utf-8", resp.Header.Get("Content-Type"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	fams, err := Parse(string(body))
	require.NoError(t, err, "%s", body)
	return fams
}

// RequireGathers checks that g gathers, as client_golang's
// testutil.GatherAndCompare sees it, the series of fams (a metrics
// handler's scrape, from Parse or Scrape) with their HELP, TYPE and
// values, less the Go runtime's families (go_*, process_*), which a
// broker's collector leaves to the host's, and nothing else. Label order
// does not matter (Gather sorts labels by name, RabbitMQ's layout does
// not).
func RequireGathers(t testing.TB, g prometheus.Gatherer, fams map[string]*Family) {
	t.Helper()
	want := Canonical(fams, func(name string) bool {
		return !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_")
	})
	require.NoError(t, testutil.GatherAndCompare(g, strings.NewReader(want)))
}

// Canonical writes fams back as exposition text, families and labels
// sorted, the families keep says only and those with samples only.
func Canonical(fams map[string]*Family, keep func(name string) bool) string {
	names := make([]string, 0, len(fams))
	for name, f := range fams {
		if keep(name) && len(f.Samples) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		f := fams[name]
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, f.Help, name, f.Type)
		keys := make([]string, 0, len(f.Samples))
		for k := range f.Samples {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b.WriteString(name)
			if k != "" {
				b.WriteString("{" + k + "}")
			}
			b.WriteString(" " + strconv.FormatFloat(f.Samples[k], 'g', -1, 64) + "\n")
		}
	}
	return b.String()
}
