package fakeserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOutageShapesInMemory(t *testing.T) {
	// Each shape for 3 s, then the server is back; a client with a 200ms
	// timeout per request.
	rows := []struct {
		shape OutageShape
		check func(t *testing.T, resp *http.Response, err error, took time.Duration)
	}{
		{OutageError, func(t *testing.T, resp *http.Response, err error, took time.Duration) {
			require.NoError(t, err)
			assert.Equal(t, 502, resp.StatusCode)
			assert.Zero(t, took)
		}},
		{OutageReset, func(t *testing.T, resp *http.Response, err error, took time.Duration) {
			assert.ErrorIs(t, err, ErrConnReset)
			assert.Zero(t, took)
		}},
		{OutageSlow, func(t *testing.T, resp *http.Response, err error, took time.Duration) {
			assert.ErrorIs(t, err, context.DeadlineExceeded, "slower than the client's timeout")
			assert.Equal(t, 200*time.Millisecond, took)
		}},
		{OutageHang, func(t *testing.T, resp *http.Response, err error, took time.Duration) {
			assert.ErrorIs(t, err, context.DeadlineExceeded, "never answers")
			assert.Equal(t, 200*time.Millisecond, took)
		}},
	}
	for _, r := range rows {
		t.Run(r.shape.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Limit: 1000, Burst: 1000, Faults: Faults{
					Outage: r.shape, OutageStatus: 502, OutageDelay: time.Second}})
				start := time.Now()
				s.SetOutage(start, start.Add(3*time.Second))
				send := func() (*http.Response, time.Duration, error) {
					ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
					defer cancel()
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://fake.test/", nil)
					began := time.Now()
					resp, err := s.Transport().RoundTrip(req)
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					return resp, time.Since(began), err
				}
				for range 3 {
					resp, took, err := send()
					r.check(t, resp, err, took)
				}
				time.Sleep(3*time.Second - time.Since(start))
				resp, _, err := send()
				require.NoError(t, err)
				assert.Equal(t, 200, resp.StatusCode, "back after the outage")
				st := s.Stats()
				assert.EqualValues(t, 3, st.Outage, "requests that arrived during the outage")
				assert.EqualValues(t, 4, st.Total)
				assert.EqualValues(t, 1, st.Admitted)
			})
		})
	}
}

func TestOutageHangEndsWithTheOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Faults: Faults{Outage: OutageHang}})
		start := time.Now()
		s.SetOutage(start, start.Add(time.Second))
		req, _ := http.NewRequest(http.MethodGet, "http://fake.test/", nil)
		_, err := s.Transport().RoundTrip(req)
		assert.ErrorIs(t, err, ErrConnReset, "a client without a timeout is cut off when the host comes back")
		assert.Equal(t, time.Second, time.Since(start))
	})
}

func TestOutageShapesLoopback(t *testing.T) {
	for _, shape := range []OutageShape{OutageReset, OutageHang, OutageSlow} {
		t.Run(shape.String(), func(t *testing.T) {
			fs, err := Start(Config{Limit: 1000, Burst: 1000, Faults: Faults{Outage: shape, OutageDelay: 5 * time.Second}})
			require.NoError(t, err)
			defer fs.Close()
			now := time.Now()
			fs.Server.SetOutage(now, now.Add(time.Minute))
			tr := &http.Transport{ResponseHeaderTimeout: 100 * time.Millisecond}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(fs.URL + "/")
			if err == nil {
				resp.Body.Close()
			}
			require.Error(t, err)
			if shape != OutageReset {
				var ne interface{ Timeout() bool }
				require.True(t, errors.As(err, &ne) && ne.Timeout(), "%v", err)
			}
			// The client may give up before the server's handler has
			// counted the request: a loaded machine can hold the server's
			// goroutine past the 100ms timeout. The request is there all
			// the same, and is counted once it is read.
			require.Eventually(t, func() bool { return fs.Server.Stats().Outage >= 1 }, 10*time.Second, time.Millisecond)
			assert.EqualValues(t, 1, fs.Server.Stats().Outage)
			fs.Server.SetOutage(time.Time{}, time.Time{})
		})
	}
}

func TestParseOutageShape(t *testing.T) {
	for _, s := range []OutageShape{OutageError, OutageReset, OutageSlow, OutageHang} {
		got, err := ParseOutageShape(s.String())
		require.NoError(t, err)
		assert.Equal(t, s, got)
	}
	_, err := ParseOutageShape("flaky")
	assert.ErrorContains(t, err, "unknown outage shape")
	assert.Equal(t, "OutageShape(9)", OutageShape(9).String())
}
