package fakeserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerRetryAfter(t *testing.T) {
	clk := newClock()
	s := New(Config{Limit: 50, Burst: 10, Now: clk.Now})
	for i := range 10 {
		resp := get(s, "/items/"+strconv.Itoa(i))
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d", i)
	}
	resp := get(s, "/items/10")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	// The exact wait is 20ms; Retry-After rounds it up to a whole second.
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Equal(t, "Tue, 10 Mar 2026 12:00:00 GMT", resp.Header.Get("Date"))

	clk.Advance(time.Second)
	resp = get(s, "/items/10")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	assert.JSONEq(t, `{"path":"/items/10"}`, string(body))
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Equal(t, Stats{Total: 12, Admitted: 11, Rejected: 1}, s.Stats())
}

func TestServerEarly(t *testing.T) {
	clk := newClock()
	s := New(Config{Limit: 50, Now: clk.Now})
	require.Equal(t, http.StatusOK, get(s, "/").StatusCode)
	require.Equal(t, http.StatusTooManyRequests, get(s, "/").StatusCode) // told: 1s
	clk.Advance(20 * time.Millisecond)
	// The limiter admits this one, but the client was told to wait 1s.
	require.Equal(t, http.StatusOK, get(s, "/").StatusCode)
	require.Equal(t, http.StatusTooManyRequests, get(s, "/").StatusCode) // early, told 1s again
	clk.Advance(999 * time.Millisecond)
	require.Equal(t, http.StatusOK, get(s, "/").StatusCode) // still early: 1.02s was named
	clk.Advance(20 * time.Millisecond)
	require.Equal(t, http.StatusOK, get(s, "/").StatusCode) // on time
	assert.Equal(t, Stats{Total: 6, Admitted: 4, Rejected: 2, Early: 3, Ignored: 3}, s.Stats())
}

// TellWaits names, on each rejection that names a wait, when the key's (or
// the token's) wait ends, on the real clock; a bare 429 names none.
func TestServerTellsWaits(t *testing.T) {
	clk := newClock()
	s := New(Config{Limit: 1, Window: 2 * time.Second, Algorithm: FixedWindow, ClockSkew: 30 * time.Second,
		Dialect: RetryAfterDate{}, TellWaits: true, Now: clk.Now,
		Global: GlobalLimit{Limit: 3, Window: 10 * time.Second, Algorithm: FixedWindow}, Key: func(r *http.Request) string { return r.URL.Path }})
	clk.Advance(500 * time.Millisecond)
	require.Equal(t, http.StatusOK, get(s, "/a").StatusCode)
	assert.Empty(t, get(s, "/b").Header.Get(WaitHeader)) // admitted
	resp := get(s, "/a")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	// The window began on the server's even second: it ends at t0+2s.
	assert.Equal(t, strconv.FormatInt(t0.Add(2*time.Second).UnixNano(), 10), resp.Header.Get(WaitHeader))
	resp = get(s, "/c")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, strconv.FormatInt(t0.Add(10*time.Second).UnixNano(), 10)+"; global", resp.Header.Get(WaitHeader))

	bare := New(Config{Limit: 1, Dialect: Bare{}, TellWaits: true, Now: clk.Now})
	get(bare, "/")
	resp = get(bare, "/")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Empty(t, resp.Header.Get(WaitHeader))
}

// A request that arrives inside an announced wait is ignored only once the
// response that announced it has left: one already on its way when the
// server decided could not know. A bare 429 names no wait: nothing is
// ignored.
func TestServerIgnoredCountsOnlyWhatTheClientCouldKnow(t *testing.T) {
	for _, c := range []struct {
		dialect Dialect
		ignored int64
	}{{RetryAfterSeconds{}, 1}, {Bare{}, 0}} {
		synctest.Test(t, func(t *testing.T) {
			s := New(Config{Limit: 1, Burst: 1, Dialect: c.dialect, Faults: Faults{Latency: 20 * time.Millisecond}})
			require.Equal(t, http.StatusOK, get(s, "/").StatusCode)
			go get(s, "/") // throttled; its answer leaves 20 ms later
			time.Sleep(10 * time.Millisecond)
			go get(s, "/") // on its way before that answer came
			time.Sleep(20 * time.Millisecond)
			get(s, "/") // sent after it came
			synctest.Wait()
			st := s.Stats()
			assert.Equal(t, int64(3), st.Rejected, "%T", c.dialect)
			assert.Equal(t, int64(2), st.Early, "%T", c.dialect)
			assert.Equal(t, c.ignored, st.Ignored, "%T", c.dialect)
		})
	}
}

func TestServerEarlyBareUsesExactWait(t *testing.T) {
	clk := newClock()
	s := New(Config{Limit: 50, Now: clk.Now, Dialect: Bare{}})
	get(s, "/")
	resp := get(s, "/")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Retry-After"))
	clk.Advance(19 * time.Millisecond)
	get(s, "/") // early
	clk.Advance(time.Millisecond)
	assert.Equal(t, http.StatusOK, get(s, "/").StatusCode)
	assert.Equal(t, Stats{Total: 4, Admitted: 2, Rejected: 2, Early: 1}, s.Stats())
}

func TestServerKeys(t *testing.T) {
	clk := newClock()
	s := New(Config{Limit: 1, Now: clk.Now, Key: KeyByHeader("Authorization")})
	assert.Equal(t, http.StatusOK, get(s, "/", "Authorization", "a").StatusCode)
	assert.Equal(t, http.StatusOK, get(s, "/", "Authorization", "b").StatusCode)
	assert.Equal(t, http.StatusTooManyRequests, get(s, "/", "Authorization", "a").StatusCode)
	assert.Equal(t, http.StatusOK, get(s, "/").StatusCode)
	assert.Equal(t, int64(1), s.Stats().Rejected)
}

func TestServerMaxKeys(t *testing.T) {
	clk := newClock()
	s := New(Config{Limit: 1, Now: clk.Now, Key: KeyByHeader("K"), MaxKeys: 2})
	get(s, "/", "K", "a")
	clk.Advance(time.Millisecond)
	get(s, "/", "K", "b")
	clk.Advance(time.Millisecond)
	get(s, "/", "K", "c") // neither is at rest: a, the least recently seen, goes
	assert.Len(t, s.keys, 2)
	assert.NotContains(t, s.keys, "a")
	clk.Advance(time.Second)
	get(s, "/", "K", "a") // b and c are at rest now: both go
	assert.Len(t, s.keys, 1)
}

func TestServerSkewAndHandler(t *testing.T) {
	clk := newClock()
	s := New(Config{
		Now:       clk.Now,
		ClockSkew: -90 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
		}),
	})
	resp := get(s, "/")
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "Tue, 10 Mar 2026 11:58:30 GMT", resp.Header.Get("Date"))
}

func TestServerStatsPath(t *testing.T) {
	clk := newClock()
	s := New(Config{Limit: 2, Burst: 2, Now: clk.Now})
	for range 3 {
		get(s, "/")
	}
	resp := get(s, DefaultStatsPath+"?window=1s")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got statsResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	assert.Equal(t, Stats{Total: 3, Admitted: 2, Rejected: 1}, got.Stats)
	assert.Equal(t, 2, got.Peak)
	assert.Equal(t, "token-bucket", got.Algorithm)
	assert.Equal(t, int64(3), s.Stats().Total, "the stats path is not counted")
	assert.Equal(t, http.StatusBadRequest, get(s, DefaultStatsPath+"?window=x").StatusCode)
}

func TestServerPeakRateAndReset(t *testing.T) {
	clk := newClock()
	s := New(Config{Algorithm: FixedWindow, Limit: 5, Now: clk.Now})
	clk.Advance(900 * time.Millisecond)
	for range 6 {
		get(s, "/")
	}
	clk.Advance(100 * time.Millisecond)
	for range 6 {
		get(s, "/")
	}
	assert.Equal(t, 10, s.PeakRate(time.Second), "fixed windows let 2·Limit through across a boundary")
	assert.Equal(t, 5, s.PeakRate(100*time.Millisecond))
	assert.Equal(t, 0, s.PeakRate(0))
	s.Reset()
	assert.Equal(t, Stats{}, s.Stats())
	assert.Equal(t, 0, s.PeakRate(time.Second))
	assert.Equal(t, http.StatusOK, get(s, "/").StatusCode)
}

// TestServerSynctest runs an obedient client against the in-memory
// transport in a synctest bubble, where time.Sleep is instant and exact.
func TestServerSynctest(t *testing.T) {
	for _, alg := range []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Algorithm: alg, Limit: 10, Burst: 3})
				c := &http.Client{Transport: s.Transport()}
				for i := range 100 {
					resp, err := c.Get("http://fake.test/items/" + strconv.Itoa(i))
					require.NoError(t, err)
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
						require.NoError(t, err)
						time.Sleep(time.Duration(secs) * time.Second)
					}
				}
				st := s.Stats()
				assert.Equal(t, int64(100), st.Total)
				assert.Zero(t, st.Early)
				assert.LessOrEqual(t, s.PeakRate(time.Second), 20)
			})
		})
	}
}

func TestServerConcurrent(t *testing.T) {
	s := New(Config{Limit: 1000, Burst: 100, Key: KeyByHeader("K")})
	tr := s.Transport()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				req, _ := http.NewRequest(http.MethodGet, "http://fake.test/", nil)
				req.Header.Set("K", strconv.Itoa((g+i)%3))
				resp, err := tr.RoundTrip(req)
				if assert.NoError(t, err) {
					resp.Body.Close()
				}
				_ = s.Stats()
				_ = s.PeakRate(time.Millisecond)
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	assert.Equal(t, int64(1600), st.Total)
	assert.Equal(t, st.Total, st.Admitted+st.Rejected)
}

func TestStartLoopback(t *testing.T) {
	fs, err := Start(Config{Limit: 100, Burst: 5})
	require.NoError(t, err)
	defer fs.Close()
	assert.Regexp(t, `^http://127\.0\.0\.1:\d+$`, fs.URL)
	c := fs.Client()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				resp, err := c.Get(fs.URL + "/x")
				if assert.NoError(t, err) {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	st := fs.Server.Stats()
	assert.Equal(t, int64(40), st.Total)
	assert.Equal(t, st.Total, st.Admitted+st.Rejected)
	assert.GreaterOrEqual(t, st.Admitted, int64(5))

	resp, err := c.Get(fs.URL + DefaultStatsPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	var got Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	assert.Equal(t, st, got)
}

func TestTransportClosesBody(t *testing.T) {
	s := New(Config{})
	body := &closeCounter{Reader: io.NopCloser(nil)}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://fake.test/", body)
	resp, err := s.Transport().RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 1, body.closes)
}

type closeCounter struct {
	io.Reader
	closes int
}

func (c *closeCounter) Read(p []byte) (int, error) { return 0, io.EOF }
func (c *closeCounter) Close() error               { c.closes++; return nil }

func TestKeyByRemoteIP(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.1:5678": "192.0.2.1",
		"[::1]:80":       "::1",
		"unix":           "unix",
	} {
		assert.Equal(t, want, KeyByRemoteIP(&http.Request{RemoteAddr: addr}))
	}
}

// A rejection that names no wait tells none, whatever headers it carries:
// Salesforce's 403 states the allocation used and HubSpot's 429 what
// remains and the interval, neither when the quota comes back. Nothing
// sent after it is counted as sent inside a wait the client knew of.
func TestServerTellsNoWaitARejectionDoesNotName(t *testing.T) {
	for _, d := range []Dialect{Salesforce{}, HubSpot{}, XRateLimit{Reset: ResetNone, Wait: WaitReset}} {
		synctest.Test(t, func(t *testing.T) {
			s := New(Config{Limit: 1, Window: time.Minute, Dialect: d, TellWaits: true})
			o := NewObserver(s, s.Transport())
			send := func() *http.Response {
				req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
				resp, err := o.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				return resp
			}
			require.Equal(t, http.StatusOK, send().StatusCode)
			resp := send()
			require.NotEqual(t, http.StatusOK, resp.StatusCode, "%T", d)
			assert.Empty(t, resp.Header.Get(WaitHeader), "%T", d)
			time.Sleep(time.Second)
			send()
			assert.Zero(t, s.Stats().Ignored, "%T", d)
			assert.Zero(t, o.Known(), "%T", d)
		})
	}
}
