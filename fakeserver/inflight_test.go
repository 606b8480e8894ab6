package fakeserver

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestMaxInFlight: a key with MaxInFlight requests in progress has the
// next one rejected, with the Dialect's wait and without spending its
// limit; one of another key, or one after an answer, is admitted.
func TestMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := New(Config{Limit: 100, Burst: 100, Dialect: RetryAfterSeconds{}, MaxInFlight: 2,
			Key:    func(r *http.Request) string { return r.Header.Get("X-Key") },
			Faults: Faults{Latency: 100 * time.Millisecond}})
		rt := srv.Transport()
		get := func(key string) *http.Response {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
			req.Header.Set("X-Key", key)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if resp := get("a"); resp.StatusCode != http.StatusOK {
					t.Errorf("a request within the bound got %d", resp.StatusCode)
				}
			})
		}
		synctest.Wait() // both in progress
		resp := get("a")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("the third at once got %d, Retry-After %q; want 429, 1", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if resp := get("b"); resp.StatusCode != http.StatusOK {
			t.Errorf("another key's got %d", resp.StatusCode)
		}
		wg.Wait()
		if resp := get("a"); resp.StatusCode != http.StatusOK {
			t.Errorf("a request after the answers got %d", resp.StatusCode)
		}
		st := srv.Stats()
		if st.Admitted != 4 || st.Rejected != 1 {
			t.Errorf("stats: %d admitted, %d rejected; want 4, 1", st.Admitted, st.Rejected)
		}
	})
}
