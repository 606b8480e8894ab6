package fakeserver

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"
)

// Stats counts what a Server did. Every request except those to the stats
// path counts once in Total and once in exactly one of Admitted, Rejected,
// Blocked, Banned, Outage, Errors and Resets; Early counts requests again by when they came.
type Stats struct {
	// Total is the number of requests received.
	Total int64 `json:"total"`
	// Admitted is the number of requests the limiter let through.
	Admitted int64 `json:"admitted"`
	// Rejected is the number of requests the limiter rejected (429, or the
	// status the dialect uses, such as GitHub's 403).
	Rejected int64 `json:"rejected"`
	// Early is the number of requests that arrived while their key had been
	// told to wait: before the instant named by the last rejection of that
	// key (its Retry-After, or its reset time for a dialect without one). A
	// client that obeys the server keeps it at zero.
	Early int64 `json:"early"`
	// Ignored is the number of requests that arrived inside a wait the
	// server had told their key of (a Retry-After, or a quota it said was
	// spent and when it comes back), after the response that told it had
	// left the server (its latency included): a client that had read it
	// sent them anyway. Unlike Early, it counts neither the requests
	// already on their way when the server decided, nor waits that a bare
	// 429 does not name.
	Ignored int64 `json:"ignored"`
	// Outage is the number of requests that arrived during an outage.
	Outage int64 `json:"outage"`
	// Errors is the number of requests answered with a random error.
	Errors int64 `json:"errors"`
	// Resets is the number of requests whose connection was reset.
	Resets int64 `json:"resets"`
	// Blocked is the number of requests that arrived while their key was
	// blocked (see Penalty.Block), rejected without reaching the limiter.
	// The rejection that began a block counts in Rejected.
	Blocked int64 `json:"blocked"`
	// Banned is the number of requests that arrived while their key was
	// banned (see Penalty.BanAfter).
	Banned int64 `json:"banned"`
	// Bans is the number of bans imposed (not a request count).
	Bans int64 `json:"bans"`
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// PeakRate returns the largest number of admitted requests in any interval
// [t, t+window) since the server started or was last Reset; zero if window
// is not positive. The server keeps the time of every admitted request for
// this (8 bytes each: a few million requests take some tens of megabytes);
// Reset frees them.
func (s *Server) PeakRate(window time.Duration) int {
	if window <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.IsSorted(s.admitted) { // only with a clock that went back
		slices.Sort(s.admitted)
	}
	return peak(s.admitted, int64(window))
}

// peak returns the most elements of the sorted ts in any [t, t+w).
func peak(ts []int64, w int64) int {
	best, i := 0, 0
	for j, t := range ts {
		for t-ts[i] >= w {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}

// Reset zeroes the counters, forgets the admitted times, and puts every
// key's limiter back at rest, as if the server had just started. The
// scheduled outage, if any, is kept.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = Stats{}
	s.admitted = nil
	clear(s.keys)
	clear(s.globals)
}

// statsResponse is the JSON at the stats path.
type statsResponse struct {
	Stats
	// Peak is PeakRate(PeakWindow).
	Peak       int    `json:"peak"`
	PeakWindow string `json:"peak_window"`
	Limit      int    `json:"limit"`
	Window     string `json:"window"`
	Algorithm  string `json:"algorithm"`
}

// serveStats writes the Stats as JSON. A "window" query parameter, a Go
// duration such as 1s, sets the window of the peak rate; it defaults to
// Config.Window.
func (s *Server) serveStats(w http.ResponseWriter, r *http.Request, now time.Time) {
	pw := s.cfg.Window
	if q := r.URL.Query().Get("window"); q != "" {
		d, err := time.ParseDuration(q)
		if err != nil || d <= 0 {
			http.Error(w, "fakeserver: bad window: "+q, http.StatusBadRequest)
			return
		}
		pw = d
	}
	resp := statsResponse{
		Stats:      s.Stats(),
		Peak:       s.PeakRate(pw),
		PeakWindow: pw.String(),
		Limit:      s.cfg.Limit,
		Window:     s.cfg.Window.String(),
		Algorithm:  s.cfg.Algorithm.String(),
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Date", httpDate(s.clock.time(now)))
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(resp)
}
