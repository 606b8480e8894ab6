package fakeserver

import (
	"context"
	"net/http"
	"time"
)

// latency returns the delay to add to the response. Called with s.mu held.
func (s *Server) latency() time.Duration { return 0 }

// fault decides whether the request arriving at now meets a fault. Called
// with s.mu held.
func (s *Server) fault(now time.Time) (verdict, bool) { return verdict{}, false }

func resetConn(w http.ResponseWriter) { panic(http.ErrAbortHandler) }

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
