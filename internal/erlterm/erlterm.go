package erlterm

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Format prints v as ~p prints the term RabbitMQ decodes from the same
// JSON; a float64 is a float ("3.0").
func Format(v any) string { return format(v, false) }

// FormatLoose is Format for values whose numbers may be float64 for any
// JSON number (a decoder without UseNumber): an integral float64 below
// 1e15 in magnitude prints as an integer ("3"), as does a json.Number
// that holds one.
func FormatLoose(v any) string { return format(v, true) }

func format(v any, loose bool) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return Binary(x)
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return strconv.FormatInt(n, 10)
		}
		if f, err := x.Float64(); err == nil {
			return format(f, loose)
		}
		return x.String()
	case float64:
		if loose && x == float64(int64(x)) && x < 1e15 && x > -1e15 {
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
			parts[i] = format(e, loose)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = Binary(k) + " => " + format(x[k], loose)
		}
		return "#{" + strings.Join(parts, ",") + "}"
	}
	if !loose {
		// Other Go numbers (int32, uint8, float32 …), strings and bools
		// as the JSON value they stand for.
		switch rv := reflect.ValueOf(v); rv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return strconv.FormatInt(rv.Int(), 10)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if u := rv.Uint(); u <= 1<<63-1 {
				return strconv.FormatInt(int64(u), 10)
			}
			return format(float64(rv.Uint()), false)
		case reflect.Float32, reflect.Float64:
			return format(rv.Float(), false)
		case reflect.String:
			return Binary(rv.String())
		case reflect.Bool:
			return strconv.FormatBool(rv.Bool())
		}
	}
	return fmt.Sprintf("%v", v)
}

// Binary prints s as ~p prints the binary <<"s">>.
func Binary(s string) string {
	return `<<"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `">>`
}

// ValidationError is a definition RabbitMQ would refuse (a policy, a
// runtime parameter). Error is RabbitMQ's text
// (rabbit_runtime_parameters:format_error): "Validation failed", a blank
// line, then one line per problem.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("Validation failed\n\n")
	for _, p := range e.Problems {
		b.WriteString(p)
		b.WriteByte('\n')
	}
	return b.String()
}
