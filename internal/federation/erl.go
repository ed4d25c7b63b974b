package federation

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// erl prints v as RabbitMQ's ~p prints the decoded JSON term in its
// validation texts: strings as binaries, objects as maps, lists as lists.
func erl(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return erlBinary(x)
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return strconv.FormatInt(n, 10)
		}
		if f, err := x.Float64(); err == nil {
			return erl(f)
		}
		return x.String()
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		if x == float64(int64(x)) && x < 1e15 && x > -1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = erl(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case map[string]any:
		keys := sortedKeys(x)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = erlBinary(k) + " => " + erl(x[k])
		}
		return "#{" + strings.Join(parts, ",") + "}"
	}
	return fmt.Sprintf("%v", v)
}

func erlBinary(s string) string {
	return `<<"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `">>`
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
