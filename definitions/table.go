package definitions

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
	"unicode/utf8"

	"github.com/warrenmq/broker/amqp"
)

// TableJSON converts a field table to JSON values the way RabbitMQ's
// management API and definitions show them: numbers as numbers,
// timestamps as Unix seconds, byte arrays as strings when they are UTF-8
// (else base64), nested tables as objects. It never returns nil, so JSON
// shows {}.
func TableJSON(t amqp.Table) map[string]any {
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = valueJSON(v)
	}
	return out
}

func valueJSON(v any) any {
	switch v := v.(type) {
	case amqp.Table:
		return TableJSON(v)
	case map[string]any:
		return TableJSON(v)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = valueJSON(x)
		}
		return out
	case []byte:
		if utf8.Valid(v) {
			return string(v)
		}
		return base64.StdEncoding.EncodeToString(v)
	case time.Time:
		return v.Unix()
	case amqp.Decimal:
		return float64(v.Value) / math.Pow10(int(v.Scale))
	case float32:
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Sprint(v) // JSON has no NaN or infinity
		}
		return v
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprint(v)
		}
		return v
	case nil, string, bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, int:
		return v
	}
	return fmt.Sprint(v)
}

// JSONTable converts JSON arguments to a field table: whole numbers become
// int64 (RabbitMQ's "l"), other numbers float64, objects nested tables.
// nil and {} give a nil table. The table must pass amqp.Table's Validate
// (names and sizes AMQP can carry).
func JSONTable(m map[string]any) (amqp.Table, error) {
	if len(m) == 0 {
		return nil, nil
	}
	t := make(amqp.Table, len(m))
	for k, v := range m {
		x, err := jsonValue(v, 0)
		if err != nil {
			return nil, fmt.Errorf("argument %q: %w", k, err)
		}
		t[k] = x
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// maxJSONDepth bounds nesting, as the wire's table decoder does.
const maxJSONDepth = 64

func jsonValue(v any, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("nested too deeply")
	}
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", v)
		}
		return f, nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), nil
		}
		return v, nil
	case map[string]any:
		t := make(amqp.Table, len(v))
		for k, x := range v {
			y, err := jsonValue(x, depth+1)
			if err != nil {
				return nil, err
			}
			t[k] = y
		}
		return t, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			y, err := jsonValue(x, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = y
		}
		return out, nil
	case nil, string, bool:
		return v, nil
	}
	return nil, fmt.Errorf("unsupported JSON value %T", v)
}

// DecodeJSON decodes one JSON value from r into v with UseNumber, so whole
// numbers stay integers, and refuses trailing data after it. An empty
// input is io.EOF.
func DecodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
