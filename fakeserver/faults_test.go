package fakeserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOutage(t *testing.T) {
	clk := newClock()
	s := New(Config{Limit: 1, Now: clk.Now, Faults: Faults{OutageStatus: http.StatusServiceUnavailable}})
	s.SetOutage(t0.Add(time.Second), t0.Add(2*time.Second))
	steps := []struct {
		at   time.Duration
		want int
	}{
		{0, 200},
		{time.Second - 1, 429},
		{time.Second, 503},
		{2*time.Second - 1, 503},
		{2 * time.Second, 200}, // the outage spent no quota
		{2 * time.Second, 429},
	}
	for i, st := range steps {
		clk.Set(t0.Add(st.at))
		assert.Equal(t, st.want, get(s, "/").StatusCode, "step %d", i)
	}
	// The request at 1s came before the Retry-After of the 429 just before it.
	assert.Equal(t, Stats{Total: 6, Admitted: 2, Rejected: 2, Early: 1, Ignored: 1, Outage: 2}, s.Stats())

	s.SetOutage(time.Time{}, time.Time{})
	clk.Advance(time.Second)
	assert.Equal(t, 200, get(s, "/").StatusCode)
}

func TestRandomErrorsAreSeeded(t *testing.T) {
	run := func(seed uint64) ([]int, Stats) {
		s := New(Config{Limit: 1 << 20, Burst: 1 << 20, Faults: Faults{ErrorRate: 0.3, ErrorStatus: 502, Seed: seed}})
		var codes []int
		for range 1000 {
			codes = append(codes, get(s, "/").StatusCode)
		}
		return codes, s.Stats()
	}
	a, st := run(42)
	b, _ := run(42)
	c, _ := run(43)
	assert.Equal(t, a, b, "same seed, same faults")
	assert.NotEqual(t, a, c)
	assert.InDelta(t, 300, st.Errors, 50)
	assert.Equal(t, st.Total, st.Admitted+st.Errors)
	assert.Contains(t, a, 502)
}

func TestResetInMemory(t *testing.T) {
	s := New(Config{Faults: Faults{ResetRate: 1}})
	req, _ := http.NewRequest(http.MethodGet, "http://fake.test/", nil)
	resp, err := s.Transport().RoundTrip(req)
	assert.Nil(t, resp)
	assert.ErrorIs(t, err, ErrConnReset)
	assert.ErrorIs(t, err, syscall.ECONNRESET)
	assert.Equal(t, Stats{Total: 1, Resets: 1}, s.Stats())
}

func TestResetLoopback(t *testing.T) {
	fs, err := Start(Config{Faults: Faults{ResetRate: 1}})
	require.NoError(t, err)
	defer fs.Close()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(fs.URL + "/")
	if err == nil {
		resp.Body.Close()
	}
	require.Error(t, err)
	st := fs.Server.Stats()
	assert.Positive(t, st.Resets)
	assert.Equal(t, st.Total, st.Resets)
}

func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Faults: Faults{Latency: 100 * time.Millisecond}})
		c := &http.Client{Transport: s.Transport()}
		start := time.Now()
		resp, err := c.Get("http://fake.test/")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 100*time.Millisecond, time.Since(start))
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	})
}

func TestJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Limit: 1000, Burst: 1000, Faults: Faults{Latency: 10 * time.Millisecond, Jitter: 50 * time.Millisecond, Seed: 7}})
		c := &http.Client{Transport: s.Transport()}
		var seen []time.Duration
		for range 20 {
			start := time.Now()
			resp, err := c.Get("http://fake.test/")
			require.NoError(t, err)
			resp.Body.Close()
			d := time.Since(start)
			assert.GreaterOrEqual(t, d, 10*time.Millisecond)
			assert.Less(t, d, 60*time.Millisecond)
			seen = append(seen, d)
		}
		assert.NotEqual(t, seen[0], seen[1])
	})
}

func TestLatencyHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Faults: Faults{Latency: time.Second}})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://fake.test/", nil)
		start := time.Now()
		resp, err := s.Transport().RoundTrip(req)
		assert.Nil(t, resp)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
		assert.Equal(t, 30*time.Millisecond, time.Since(start))
	})
}

func TestLatencyLoopbackCancel(t *testing.T) {
	fs, err := Start(Config{Faults: Faults{Latency: time.Minute}})
	require.NoError(t, err)
	defer fs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fs.URL+"/", nil)
	c := fs.Client()
	resp, err := c.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	// Close returns only once the handler has given up its one-minute wait.
}

// Handshake holds the first Handshakes requests a random time under it
// before the server counts them, and no more: a flight sent at once
// arrives spread, and the limiter sees it so.
func TestHandshakeSpreadsTheFirstFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		srv := New(Config{Limit: 100, Burst: 100, Faults: Faults{Handshake: 100 * time.Millisecond, Handshakes: 8, Seed: 3},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				at = append(at, time.Since(start))
				mu.Unlock()
			})})
		client := &http.Client{Transport: srv.Transport()}
		get := func() {
			resp, err := client.Get("http://api.test/x")
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(get)
		}
		wg.Wait()
		require.Len(t, at, 8)
		distinct := map[time.Duration]bool{}
		for _, d := range at {
			assert.Less(t, d, 100*time.Millisecond)
			distinct[d] = true
		}
		assert.Greater(t, len(distinct), 4, "the flight arrives spread: %v", at)

		// The ninth is not held.
		mark := time.Since(start)
		get()
		assert.Equal(t, mark, at[8])
		assert.Equal(t, int64(9), srv.Stats().Total)
	})
}

// A request that Handshake holds past a rejection it could not have
// heard of reaches the server inside the wait (Early) but is not counted
// as sent after the client heard of it (Ignored).
func TestHandshakeCountsEarlyAsOfArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := New(Config{Limit: 1, Burst: 1, Dialect: RetryAfterSeconds{},
			Faults: Faults{Handshake: 50 * time.Millisecond, Handshakes: 3, Seed: 1}})
		client := &http.Client{Transport: srv.Transport()}
		var wg sync.WaitGroup
		for range 3 { // the third is counted after the second's 429 left
			wg.Go(func() {
				resp, err := client.Get("http://api.test/x")
				if assert.NoError(t, err) {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		st := srv.Stats()
		assert.Equal(t, int64(2), st.Rejected)
		assert.Equal(t, int64(1), st.Early)
		assert.Zero(t, st.Ignored)
	})
}
