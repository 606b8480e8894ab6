package fakeserver

import (
	"context"
	"net"
	"net/http"
	"time"
)

// SetOutage schedules an outage: every request that arrives in [from, until)
// on the server's clock (Config.Now, without ClockSkew) is answered with
// Faults.OutageStatus, spends no quota, and counts in Stats.Outage. It
// replaces any outage scheduled before; SetOutage(time.Time{}, time.Time{})
// cancels it. To start an outage of d at once:
//
//	now := time.Now() // or the test's clock
//	srv.SetOutage(now, now.Add(d))
func (s *Server) SetOutage(from, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outage = [2]time.Time{from, until}
}

// latency returns the delay to add to the response. Called with s.mu held.
func (s *Server) latency() time.Duration {
	d := s.cfg.Faults.Latency
	if j := s.cfg.Faults.Jitter; j > 0 {
		d += time.Duration(s.rng.Int64N(int64(j)))
	}
	return d
}

// fault decides whether the request arriving at now meets a fault, counts
// it, and returns how to answer it. Called with s.mu held.
func (s *Server) fault(now time.Time, h http.Header) (verdict, bool) {
	f := &s.cfg.Faults
	if from, until := s.outage[0], s.outage[1]; !now.Before(from) && now.Before(until) {
		s.stats.Outage++
		h.Set("Content-Type", "application/json")
		return verdict{kind: verdictRespond, status: f.OutageStatus, body: []byte(`{"error":"outage"}` + "\n")}, true
	}
	if f.ResetRate > 0 && s.rng.Float64() < f.ResetRate {
		s.stats.Resets++
		return verdict{kind: verdictReset}, true
	}
	if f.ErrorRate > 0 && s.rng.Float64() < f.ErrorRate {
		s.stats.Errors++
		h.Set("Content-Type", "application/json")
		return verdict{kind: verdictRespond, status: f.ErrorStatus, body: []byte(`{"error":"injected error"}` + "\n")}, true
	}
	return verdict{}, false
}

// resetConn drops the connection under w without a response: with a TCP
// reset where it can hijack a TCP connection, and otherwise by aborting
// the handler, which makes net/http close the connection.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends RST, not FIN
	}
	_ = conn.Close()
}

// sleepCtx waits for d, or until ctx is done; it reports whether it waited
// the whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
