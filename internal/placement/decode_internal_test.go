package placement

import "testing"

// FuzzDecode: a lease value read from the store never panics decode, and
// what encode writes decodes to itself, whatever the holder's name.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("warren@1/00ff 7"), "warren@2/ab", uint64(3))
	f.Add([]byte("no-space"), "a b", uint64(0))
	f.Fuzz(func(t *testing.T, v []byte, holder string, gen uint64) {
		_, _, _ = decode(v)
		h, g, err := decode(encode(holder, gen))
		if err != nil || h != holder || g != gen {
			t.Fatalf("round trip: %q %d became %q %d (%v)", holder, gen, h, g, err)
		}
	})
}
