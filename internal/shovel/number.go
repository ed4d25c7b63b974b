package shovel

import "encoding/json"

// number reads a JSON number decoded with UseNumber.
func number(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}
