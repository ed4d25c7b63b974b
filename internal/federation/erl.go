package federation

import (
	"sort"

	"github.com/warrenmq/broker/internal/erlterm"
)

// erl prints v as RabbitMQ's ~p prints the decoded JSON term in its
// validation texts (erlterm.FormatLoose: Parse takes plain float64
// numbers too, so an integral one prints as the integer JSON held).
func erl(v any) string { return erlterm.FormatLoose(v) }

func erlBinary(s string) string { return erlterm.Binary(s) }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
