package headway

import "github.com/headway-go/headway/ratelimitheader"

// Some servers count a request against a bucket they name in each response
// (Discord's X-RateLimit-Bucket), per route, and several routes may share
// one bucket. One model of a key's quota cannot follow them: the answers
// of one bucket would correct the model of another. So once a response
// names its bucket, its route (the request's path) is mapped to the
// bucket, and the requests of every route of one bucket are paced by the
// bucket's own model, whatever route they take; a route not yet mapped is
// paced by the key's model. A pause (a throttle's wait, a global scope)
// still holds the whole key.

// bucketModel is the model of one server bucket of a key.
type bucketModel struct {
	m    serverModel
	sent uint64 // departures paced by it so far
}

// bucketModels maps the routes of a key to the buckets the server named.
type bucketModels struct {
	byRoute map[string]*bucketModel
	byID    map[string]*bucketModel
}

// maxRoutes bounds the routes (and buckets) a key remembers; past it, the
// key forgets them all and maps them again from the next answers.
const maxRoutes = 1024

// modelFor returns the model that paces route, and its bucket, nil for the
// key's own model.
func (k *keyState) modelFor(route string) (*serverModel, *bucketModel) {
	if k.buckets != nil {
		if b := k.buckets.byRoute[route]; b != nil {
			return &b.m, b
		}
	}
	return &k.model, nil
}

// observeBucket applies what the response to dep, sent on route, said of
// the bucket it named.
func (k *keyState) observeBucket(now int64, dep departure, route string, sig *ratelimitheader.Signal, coarse bool) {
	bs := k.buckets
	if bs == nil {
		bs = &bucketModels{byRoute: make(map[string]*bucketModel), byID: make(map[string]*bucketModel)}
		k.buckets = bs
	}
	b := bs.byID[sig.Bucket]
	if b == nil {
		if len(bs.byID) >= maxRoutes || len(bs.byRoute) >= maxRoutes {
			clear(bs.byID)
			clear(bs.byRoute)
		}
		b = &bucketModel{}
		b.m.track()
		bs.byID[sig.Bucket] = b
	}
	if old := bs.byRoute[route]; old != b {
		if len(bs.byRoute) >= maxRoutes {
			clear(bs.byRoute)
		}
		bs.byRoute[route] = b
	}
	b.m.secondReset = coarse
	if dep.sub == b {
		b.m.observe(now, dep.subSeq, b.sent, sig)
		return
	}
	// Sent before its route was mapped here: the bucket holds at most what
	// it says, less what the bucket's own requests still in flight take.
	if !b.m.known {
		b.m.observe(now, b.sent, b.sent, sig)
		return
	}
	b.m.observe(now, 0, b.sent, sig) // its reset and bounds, no innovation
	b.m.atMost(now, float64(sig.Remaining)-b.m.pending())
}
