package headway

import (
	"hash/maphash"
	"net/http"
	"sync"
	"sync/atomic"
)

// A KeyFunc maps a request to its key. Requests with the same key share one
// pacer, queue and in-flight bound; different keys never delay each other.
// Keys are held in memory only, never logged; idle keys are dropped.
type KeyFunc func(*http.Request) string

// KeyByHost keys requests by their URL's host (with its port, if any): one
// pacer per API. It is the default.
func KeyByHost(req *http.Request) string { return req.URL.Host }

// KeyByHeader returns a KeyFunc that keys requests by host and the value of
// the header name, such as "Authorization": one pacer per token, for APIs
// that limit each token on its own.
func KeyByHeader(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(req *http.Request) string {
		return req.URL.Host + "\x00" + req.Header.Get(name)
	}
}

// KeyByPath keys requests by host and URL path: one pacer per resource, for
// APIs that limit each route on its own. Paths that embed IDs make a key
// each; write a KeyFunc that maps them to their route template when the API
// limits the template as a whole.
func KeyByPath(req *http.Request) string { return req.URL.Host + req.URL.Path }

// keyTable holds the keyStates of a Transport, in shards to keep look-ups of
// different keys from contending. A shard drops its idle keys whenever it
// has grown to twice the size it had after its last sweep, so memory stays
// proportional to the keys in use, at O(1) amortised cost per new key.
type keyTable struct {
	seed   maphash.Seed // for the credentials of scopes
	kh     keyHash      // for the keys
	shards [keyShards]keyShard
}

const (
	keyShardBits  = 5
	keyShards     = 1 << keyShardBits
	minSweepAfter = 64
)

type keyShard struct {
	// read is a copy of m that get reads without a lock (an RWMutex's read
	// lock is two atomic read-modify-writes a request); nil once a sweep
	// began since it was made. Lookups it cannot answer take mu, and once
	// they add up to m's size m is copied again: O(1) a miss, amortised.
	read       atomic.Pointer[readTable]
	mu         sync.RWMutex
	m          map[string]*keyState
	sweepAfter int
	misses     int     // lookups read could not answer since it was made; under mu
	_          [8]byte // keep shards on separate cache lines
}

// hash returns the hash of the whole key that chooses its shard: keys that
// differ anywhere (an ID in the middle of a path, say) spread over the
// shards, so that neither their lock nor a sweep is shared by all of them.
// A shard's read copy finds the key by the same hash: a look-up hashes its
// key once.
func (kt *keyTable) hash(key string) uint64 { return kt.kh.sum(key) }

// shard returns the shard of a key of hash h.
func (kt *keyTable) shard(h uint64) *keyShard { return &kt.shards[h>>(64-keyShardBits)] }

// get returns the keyState of key, creating it for t from its first
// request req if it is not there.
func (kt *keyTable) get(key string, t *Transport, req *http.Request) *keyState {
	h := kt.hash(key)
	s := kt.shard(h)
	if r := s.read.Load(); r != nil {
		if k := r.find(h, key); k != nil {
			return k
		}
	}
	return s.getLocked(kt, key, t, req)
}

// getLocked is get for a key that s's read copy does not hold.
func (s *keyShard) getLocked(kt *keyTable, key string, t *Transport, req *http.Request) *keyState {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.m[key]
	if k == nil {
		if s.m == nil {
			s.m = make(map[string]*keyState)
			s.sweepAfter = minSweepAfter
		}
		if len(s.m) >= s.sweepAfter {
			s.sweep(t.now())
		}
		k = t.newKey(key, req)
		s.m[key] = k
	}
	if s.misses++; s.misses >= len(s.m) {
		s.read.Store(newReadTable(kt, s.m))
		s.misses = 0
	}
	return k
}

// readTable is a shard's read copy: the keys of its map by their hash
// (see keyTable.hash), in open addressing with linear probing, at most
// half full. It is never written once made.
type readTable struct {
	mask  uint64
	slots []readSlot
}

type readSlot struct {
	hash uint64
	key  string
	k    *keyState // nil: an empty slot
}

// newReadTable returns a read copy of m, the map of a shard of kt.
func newReadTable(kt *keyTable, m map[string]*keyState) *readTable {
	n := 8
	for n < 2*len(m) {
		n *= 2
	}
	r := &readTable{mask: uint64(n - 1), slots: make([]readSlot, n)}
	for key, k := range m {
		h := kt.hash(key)
		i := h & r.mask
		for r.slots[i].k != nil {
			i = (i + 1) & r.mask
		}
		r.slots[i] = readSlot{hash: h, key: key, k: k}
	}
	return r
}

// find returns the keyState of key, whose hash is h; nil if r does not
// hold it.
func (r *readTable) find(h uint64, key string) *keyState {
	slots := r.slots
	for i := h; ; i++ {
		s := &slots[i&uint64(len(slots)-1)]
		if s.k == nil || s.hash == h && s.key == key {
			return s.k
		}
	}
}

// sweep drops the idle keys of s. Called with s.mu held. A key is marked
// evicted only after read is dropped: whoever finds it evicted and looks
// again does not find it in read.
func (s *keyShard) sweep(now int64) {
	s.read.Store(nil)
	for key, k := range s.m {
		k.mu.Lock()
		idle := k.idle(now)
		if idle {
			k.evicted = true
			delete(s.m, key)
		}
		k.mu.Unlock()
		if idle {
			k.host.putScope(k.scope)
			k.env.hosts.put(k.host.name, k.host)
		}
	}
	s.sweepAfter = max(minSweepAfter, 2*len(s.m))
}

// len returns the number of keys held.
func (kt *keyTable) len() int {
	n := 0
	for i := range kt.shards {
		s := &kt.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
