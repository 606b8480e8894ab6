package headway

import (
	"fmt"
	"net/http"
	"strings"
)

// A Preset is the rate limit of one API: the limits its provider
// publishes, on the one host it serves, with requests grouped as the
// provider counts them (per token, per route). Package preset has the
// presets of well-known APIs; write one for any other. A Preset is an
// Option:
//
//	t := headway.New(nil, preset.GitHub(), preset.Notion())
//
// Its limits and its key apply to the requests for Host only, so one
// Transport can carry several presets, and requests to other hosts keep
// the limits of WithLimit and the KeyFunc of WithKey. Keys of different
// hosts never collide: every preset's key starts with the host.
//
// Options apply in order: a later preset for the same host, or a later
// WithHostLimit for it, replaces the limits of an earlier one, and a later
// WithKey replaces every preset's key. Put WithKey before the presets.
//
// The figures of package preset are the providers' published limits at
// the date given in each constructor's source, rounded down where the
// provider is vague. Limits change, and accounts differ (plans, tiers,
// enterprise contracts): copy a Preset and change its fields to fit yours.
// The rate-limit headers of every one of those providers are read by
// ratelimitheader.DefaultDialects(), and the Transport slows down to what
// they say is left, never beyond a Preset's limits. Dialects are set per Transport (WithDialects), not per
// preset.
type Preset struct {
	// Name is a short name for the API, such as "github".
	Name string
	// Host is the host the preset applies to, such as "api.github.com",
	// matched without regard to case, with the request's port first and
	// then without it, as in WithHostLimit. "*.myshopify.com" matches
	// every subdomain of myshopify.com: one preset for many shops, each
	// with keys of its own; the limits of a host named outright win over a
	// pattern's. It must not be empty.
	Host string
	// PathPrefix, when set, narrows the preset to the requests for Host
	// whose path begins with it, such as "/search/": its limits then apply
	// before Host's own, so preset.GitHub and preset.GitHubSearch share a Transport.
	PathPrefix string
	// Limits are the limits of every key of Host (see WithHostLimit).
	// Empty means none: the key sends one request and waits (a second at
	// most) for its answer before sending more, then paces to what the
	// server says.
	Limits []Limit
	// Key groups the requests for Host into keys. Nil leaves them to the
	// Transport's KeyFunc. It should start its keys with req.URL.Host, as
	// KeyByHeader does, so that they never collide with another host's.
	Key KeyFunc

	// Routes are limits of their own for some of Host's requests (by path
	// under PathPrefix, or by a test of the request such as its method),
	// which applied before Limits; Key should give them keys of their own.
	Routes []Route
}

// A Route is a part of a Preset's requests with limits of its own, such
// as an API's search endpoints or its writes. A request takes the limits
// of the last of a Preset's Routes that it matches, else the Preset's.
type Route struct {
	// PathPrefix narrows the route to the requests whose path, after the
	// Preset's PathPrefix, begins with it. Empty matches every path.
	PathPrefix string
	// Match, when set, narrows the route further to the requests it
	// reports true for. It must be safe for concurrent use.
	Match func(*http.Request) bool
	// Limits are the limits of every key of the route.
	Limits []Limit
}

// apply gives the requests for p.Host the limits of p, and wraps the
// config's KeyFunc in one that keys the requests for p.Host with p.Key and
// hands the others to the KeyFunc it wraps.
func (p Preset) apply(c *config) {
	host := strings.ToLower(p.Host)
	if host == "" {
		panic(fmt.Sprintf("headway: preset %q has no Host", p.Name))
	}
	switch {
	case p.PathPrefix == "" && !strings.HasPrefix(host, "*."):
		WithHostLimit(host, p.Limits...).apply(c)
	case len(p.Limits) > 0 || p.PathPrefix != "":
		c.routeLimits = append(c.routeLimits, routeLimit{host: host, prefix: p.PathPrefix, limits: append([]Limit(nil), p.Limits...)})
	}
	for _, r := range p.Routes {
		c.routeLimits = append(c.routeLimits, routeLimit{host: host, prefix: p.PathPrefix + r.PathPrefix, match: r.Match, limits: append([]Limit(nil), r.Limits...)})
	}
	if p.Key == nil {
		return
	}
	key, next, prefix := p.Key, c.keyFunc, p.PathPrefix
	c.keyFunc = func(req *http.Request) string {
		if matchHost(req, host) && strings.HasPrefix(req.URL.Path, prefix) {
			return key(req)
		}
		return next(req)
	}
}

// matchHost reports whether req goes to host (lower case), matched as
// config.limitsFor matches it: with the port, or without. A host
// "*.example.com" matches every subdomain of example.com.
func matchHost(req *http.Request, host string) bool {
	if req.URL == nil {
		return false
	}
	if suffix, ok := strings.CutPrefix(host, "*"); ok && strings.HasPrefix(suffix, ".") {
		h := req.URL.Hostname()
		return len(h) > len(suffix) && strings.EqualFold(h[len(h)-len(suffix):], suffix)
	}
	return strings.EqualFold(req.URL.Host, host) || strings.EqualFold(req.URL.Hostname(), host)
}
