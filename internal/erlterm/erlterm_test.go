package erlterm

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFormat: the two number rules side by side; everything else prints
// alike.
func TestFormat(t *testing.T) {
	type named string
	for _, tc := range []struct {
		name          string
		v             any
		strict, loose string
	}{
		{"null", nil, "null", "null"},
		{"a string", `a"b\c`, `<<"a\"b\\c">>`, `<<"a\"b\\c">>`},
		{"a bool", true, "true", "true"},
		{"an int64", int64(-7), "-7", "-7"},
		{"an int", 7, "7", "7"},
		{"a JSON integer", json.Number("12"), "12", "12"},
		{"a JSON float", json.Number("1.5"), "1.5", "1.5"},
		{"a JSON float that is whole", json.Number("3.0"), "3.0", "3"},
		{"a JSON number out of range", json.Number("1e400"), "1e400", "1e400"},
		{"a whole float64", 3.0, "3.0", "3"},
		{"a large whole float64", 1e20, "1e+20", "1e+20"},
		{"a float64", 0.25, "0.25", "0.25"},
		{"a list", []any{"x", int64(1), nil}, `[<<"x">>,1,null]`, `[<<"x">>,1,null]`},
		{"a map, keys sorted", map[string]any{"b": 2.0, "a": "x"}, `#{<<"a">> => <<"x">>,<<"b">> => 2.0}`, `#{<<"a">> => <<"x">>,<<"b">> => 2}`},
		{"an int32", int32(5), "5", "5"},
		{"a float32", float32(0.5), "0.5", "0.5"},
		{"a named string", named("n"), `<<"n">>`, "n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.strict, Format(tc.v), "Format")
			require.Equal(t, tc.loose, FormatLoose(tc.v), "FormatLoose")
		})
	}
}

func TestValidationError(t *testing.T) {
	for _, tc := range []struct {
		problems []string
		want     string
	}{
		{nil, "Validation failed\n\n"},
		{[]string{"a", "b"}, "Validation failed\n\na\nb\n"},
	} {
		require.EqualError(t, &ValidationError{Problems: tc.problems}, tc.want)
	}
}
