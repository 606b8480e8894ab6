package sharedquota

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway"
)

// TestPauseHoldsReservedRequests: process B reserved its shared slots
// before process A sets a pause; the requests of B still sleeping on their
// slots must wait for the pause's end too, not leave during it.
func TestPauseHoldsReservedRequests(t *testing.T) {
	addr := redisAddr(t)
	a := newQuota(t, newClient(t, addr))
	b := NewRedis(newClient(t, addr), WithPrefix(a.cfg.prefix))
	defer b.Close()

	var mu sync.Mutex
	var arrived []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived = append(arrived, time.Now())
		mu.Unlock()
	}))
	defer srv.Close()
	client := &http.Client{Transport: headway.New(srv.Client().Transport,
		headway.WithLimit(headway.PerSecond(10)), // burst 1: slots 100ms apart
		headway.WithKey(func(*http.Request) string { return "k" }),
		headway.WithSharedQuota(b),
	)}
	// A has taken the shared slots of the first 400ms: B's requests, let
	// go by its own pacer at 0, 100 and 200ms, reserve the shared slots of
	// 400, 500 and 600ms, and sleep on them.
	lim := headway.PerSecond(10)
	for range 4 {
		reserve(t, a, "k", 1, lim)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	// Every request has reserved its slot when A pauses the key until
	// 750ms.
	time.Sleep(250 * time.Millisecond)
	if err := a.Pause(context.Background(), "k", 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	pauseFrom, pauseTo := start.Add(260*time.Millisecond), start.Add(740*time.Millisecond)
	for _, at := range arrived {
		t.Logf("arrived at %v", at.Sub(start).Round(time.Millisecond))
		if at.After(pauseFrom) && at.Before(pauseTo) {
			t.Errorf("a request arrived %v after the start, during the pause", at.Sub(start).Round(time.Millisecond))
		}
	}
	// Held by the pause, they reserved again: one slot apart after it.
	for i := 1; i < len(arrived); i++ {
		if gap := arrived[i].Sub(arrived[i-1]); gap < 80*time.Millisecond {
			t.Errorf("requests %d and %d arrived %v apart after the pause, want a slot (100ms)", i-1, i, gap)
		}
	}
	if len(arrived) != 3 {
		t.Errorf("%d requests arrived, want 3", len(arrived))
	}
	if s := b.Stats(); s.Errors != 0 || s.Degraded != 0 {
		t.Errorf("stats %+v", s)
	}
}
