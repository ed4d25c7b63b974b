package codec

// Successor returns the smallest key greater than every key starting with
// p, the exclusive upper bound of a prefix scan; nil when there is none
// (p all 0xff). Every Pebble-backed store scans its key prefixes with it.
func Successor(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
