package headway

import (
	"math/bits"
	"math/rand/v2"
)

// keyHash is the hash of a whole key that chooses its shard in a keyTable
// and finds it in the shard's read copy: wyhash, as the Go runtime's own
// map hash runs it where the CPU has no AES instructions, on random
// secrets drawn once per table. Keys that differ anywhere (an ID in the
// middle of a path, say) spread over the shards. It reads eight bytes at a
// time and calls nothing: hash/maphash, through its layers, cost a
// look-up as much again as the table itself.
type keyHash struct{ seed, s1 uint64 }

func newKeyHash() keyHash { return keyHash{seed: rand.Uint64(), s1: rand.Uint64() | 1} }

// wyMix is the last constant of wyhash's.
const wyMix = 0x1d8e4e27c47d124f

func (kh keyHash) sum(key string) uint64 {
	n := len(key)
	seed := kh.seed
	var a, b uint64
	switch {
	case n == 0:
		return mix(wyMix, seed)
	case n < 4:
		a = uint64(key[0]) | uint64(key[n>>1])<<8 | uint64(key[n-1])<<16
	case n <= 8:
		a, b = le32(key, 0), le32(key, n-4)
	case n <= 16:
		a, b = le64(key, 0), le64(key, n-8)
	default:
		i := 0
		for ; n-i > 16; i += 16 {
			seed = mix(le64(key, i)^kh.s1, le64(key, i+8)^seed)
		}
		a, b = le64(key, n-16), le64(key, n-8)
	}
	return mix(wyMix^uint64(n), mix(a^kh.s1, b^seed))
}

// mix folds the 128-bit product of a and b into 64 bits.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// le32 and le64 read 4 and 8 bytes of s from i, little-endian.
func le32(s string, i int) uint64 {
	s = s[i : i+4]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

func le64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
