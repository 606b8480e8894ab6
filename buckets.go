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
//
// A route not yet answered may share the bucket of another that is
// mapped, which the client cannot know: so once the server names buckets,
// a route's first request goes alone, and the route's others wait for its
// answer (for probeWait at most), as a new key's do. Routes are sent in
// parallel all the same; only a second request of an unknown route waits.

// bucketModel is the model of one server bucket of a key.
type bucketModel struct {
	m    serverModel
	sent uint64 // departures paced by it so far
}

// bucketModels maps the routes of a key to the buckets the server named.
type bucketModels struct {
	byRoute map[string]*bucketModel // a nil value: answered without naming a bucket
	byID    map[string]*bucketModel
	probes  map[string]int64 // routes whose first request is unanswered: when it left
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

// routeProbe returns when the first request of route, not answered yet,
// left; 0 if route is answered or none of it left.
func (bs *bucketModels) routeProbe(route string) int64 {
	if _, ok := bs.byRoute[route]; ok {
		return 0
	}
	return bs.probes[route]
}

// probe notes that route's first request leaves at now, if route is not
// answered yet, and reports whether it did.
func (bs *bucketModels) probe(now int64, route string) bool {
	if _, ok := bs.byRoute[route]; ok || bs.probes[route] != 0 {
		return false
	}
	if len(bs.probes) >= maxRoutes {
		clear(bs.probes)
	}
	bs.probes[route] = max(now, 1)
	return true
}

// routeAnswered notes that an answer to a request of route came: if it
// named no bucket, the route is paced by the key's model from now on.
func (bs *bucketModels) routeAnswered(route string) {
	delete(bs.probes, route)
	if _, ok := bs.byRoute[route]; !ok {
		if len(bs.byRoute) >= maxRoutes {
			clear(bs.byRoute)
		}
		bs.byRoute[route] = nil
	}
}

// routeDone notes, under k.mu, the end of dep, a route's first request,
// that no answer observed: answered says whether one came at all (it said
// nothing of the quota); if not, the route's next request goes alone again.
func (k *keyState) routeDone(now int64, dep departure, answered bool) {
	if bs := k.buckets; bs != nil && dep.probeRoute != "" {
		if answered {
			bs.routeAnswered(dep.probeRoute)
		} else {
			delete(bs.probes, dep.probeRoute)
		}
	}
	k.dispatch(now)
}

// observeBucket applies what the response to dep, sent on route, said of
// the bucket it named.
func (k *keyState) observeBucket(now int64, dep departure, route string, sig *ratelimitheader.Signal, coarse bool) {
	bs := k.buckets
	if bs == nil {
		bs = &bucketModels{byRoute: make(map[string]*bucketModel), byID: make(map[string]*bucketModel), probes: make(map[string]int64)}
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
	delete(bs.probes, route)
	if old, ok := bs.byRoute[route]; !ok || old != b {
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
