package headway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestKeyHashSpreadsBothEnds: the read copy of a shard picks its slot by
// the low bits of a key's hash, the table its shard by the high bits: both
// spread keys that differ only in the middle, at either end or in length,
// as a uniform hash would (5 standard deviations of 100).
func TestKeyHashSpreadsBothEnds(t *testing.T) {
	for _, shape := range []string{
		"api.example.com/channels/%d/messages",
		"api.github.com/repos/owner/repo%d/issues",
		"host%d.test",
		"%d",
		"%d.a",
		strings.Repeat("x", 40) + "%d" + strings.Repeat("y", 40),
	} {
		kh := newKeyHash()
		var low, high [64]int
		for i := range 6400 {
			h := kh.sum(fmt.Sprintf(shape, i))
			low[h&63]++
			high[h>>58]++
		}
		for i := range low {
			assert.InDelta(t, 100, low[i], 50, "%q: low bits %d", shape, i)
			assert.InDelta(t, 100, high[i], 50, "%q: high bits %d", shape, i)
		}
	}
}

// TestKeyHashReadsEveryByte: a key whose one byte changes, at any place
// and any length, hashes differently.
func TestKeyHashReadsEveryByte(t *testing.T) {
	kh := newKeyHash()
	for n := range 70 {
		key := []byte(strings.Repeat("k", n))
		h := kh.sum(string(key))
		for i := range n {
			key[i] = 'j'
			assert.NotEqual(t, h, kh.sum(string(key)), "length %d, byte %d", n, i)
			key[i] = 'k'
		}
		assert.NotEqual(t, h, kh.sum(string(key)+"k"), "length %d and %d", n, n+1)
	}
}
