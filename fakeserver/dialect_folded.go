package fakeserver

import (
	"net/http"
	"strings"
)

// Folded is a Dialect behind a proxy that folds field lines: each
// rate-limit field the inner dialect writes is sent as if two layers (a
// gateway and the application) had each added it, and a proxy had joined
// the two lines into one, comma-separated (RFC 9110 5.3):
//
//	X-Ratelimit-Remaining: 4, 4
//	Retry-After: Tue, 10 Mar 2026 12:00:05 GMT, Tue, 10 Mar 2026 12:00:05 GMT
//
// A client must read such a field member by member, keeping an HTTP-date's
// own comma. Content-Type is left alone.
type Folded struct {
	Dialect Dialect
}

// Header adds the inner dialect's headers, folded.
func (d Folded) Header(h http.Header, s State) {
	d.Dialect.Header(h, s)
	fold(h)
}

// Reject returns the inner dialect's rejection, its headers folded.
func (d Folded) Reject(h http.Header, s State) Rejection {
	r := d.Dialect.Reject(h, s)
	fold(h)
	return r
}

// fold doubles every field but Content-Type into one comma-joined line.
// Fields already folded are left as they are.
func fold(h http.Header) {
	for k, vs := range h {
		if k == "Content-Type" || len(vs) != 1 || strings.HasSuffix(vs[0], ", "+vs[0]) {
			continue
		}
		h[k] = []string{vs[0] + ", " + vs[0]}
	}
}
