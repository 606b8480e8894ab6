package fakeserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// OutageShape is how a Server fails during an outage.
type OutageShape int

const (
	// OutageError answers every request with Faults.OutageStatus at once.
	OutageError OutageShape = iota
	// OutageReset resets the connection of every request, without a
	// response (a TCP RST where the connection allows it).
	OutageReset
	// OutageSlow answers every request with Faults.OutageStatus after
	// Faults.OutageDelay: a server slower than its clients' timeouts.
	OutageSlow
	// OutageHang accepts every request and never answers it: the
	// connection stays open, silent, until the client gives up or the
	// outage ends, when it is reset.
	OutageHang
)

var outageShapeNames = []string{"error", "reset", "slow", "hang"}

// String returns the shape's name as ParseOutageShape accepts it, such as
// "reset".
func (o OutageShape) String() string {
	if o >= 0 && int(o) < len(outageShapeNames) {
		return outageShapeNames[o]
	}
	return fmt.Sprintf("OutageShape(%d)", int(o))
}

// ParseOutageShape returns the OutageShape named s: "error", "reset",
// "slow" or "hang".
func ParseOutageShape(s string) (OutageShape, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for i, name := range outageShapeNames {
		if s == name {
			return OutageShape(i), nil
		}
	}
	return 0, fmt.Errorf("fakeserver: unknown outage shape %q (want one of %s)", s, strings.Join(outageShapeNames, ", "))
}

// SetOutage schedules an outage: every request that arrives in [from, until)
// on the server's clock (Config.Now, without ClockSkew) fails as
// Faults.Outage says, spends no quota, and counts in Stats.Outage. It
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

// handshake returns how long to hold the request coming in before it is
// counted (see Faults.Handshake).
func (s *Server) handshake() time.Duration {
	f := &s.cfg.Faults
	if f.Handshake <= 0 || f.Handshakes <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shaken >= f.Handshakes {
		return 0
	}
	s.shaken++
	return time.Duration(s.rng.Int64N(int64(f.Handshake)))
}

// fault decides whether the request arriving at now meets a fault, counts
// it, and returns how to answer it. Called with s.mu held.
func (s *Server) fault(now time.Time, h http.Header) (verdict, bool) {
	f := &s.cfg.Faults
	if from, until := s.outage[0], s.outage[1]; !now.Before(from) && now.Before(until) {
		s.stats.Outage++
		switch f.Outage {
		case OutageReset:
			return verdict{kind: verdictReset}, true
		case OutageHang:
			return verdict{kind: verdictHang, delay: until.Sub(now)}, true
		}
		h.Set("Content-Type", "application/json")
		v := verdict{kind: verdictRespond, status: f.OutageStatus, body: []byte(`{"error":"outage"}` + "\n")}
		if f.Outage == OutageSlow {
			v.delay = f.OutageDelay
		}
		return v, true
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

// hang holds the request's connection open without a word until the
// client gives up or d passes, then resets it. Where the connection can be
// taken over (a real one), it is held without reading from it; otherwise
// (the in-memory Transport) the handler waits on the request's context.
func hang(w http.ResponseWriter, r *http.Request, d time.Duration) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		if sleepCtx(r.Context(), d) {
			panic(http.ErrAbortHandler)
		}
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends RST, not FIN
	}
	defer conn.Close()
	// A read returns when the client closes its end, or at the deadline.
	_ = conn.SetReadDeadline(time.Now().Add(d))
	var buf [512]byte
	for {
		if _, err := conn.Read(buf[:]); err != nil {
			return
		}
	}
}
