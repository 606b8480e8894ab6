package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		// 5 a minute, burst 2: the third request is refused however long
		// a loaded machine takes to send the three (at 5 a second, one
		// sent 200ms after the first would be admitted).
		errc <- run(ctx, []string{"-addr", "127.0.0.1:0", "-rate", "5", "-window", "1m", "-burst", "2", "-dialect", "ietf"}, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	require.True(t, lines.Scan())
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(lines.Text())
	require.NotEmpty(t, url, lines.Text())

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	codes := map[int]int{}
	for range 3 {
		resp, err := c.Get(url + "/x")
		require.NoError(t, err)
		codes[resp.StatusCode]++
		assert.NotEmpty(t, resp.Header.Get("RateLimit-Policy"))
		resp.Body.Close()
	}
	assert.Equal(t, 2, codes[http.StatusOK])
	assert.Equal(t, 1, codes[http.StatusTooManyRequests])

	resp, err := c.Get(url + "/_stats")
	require.NoError(t, err)
	var st struct{ Total, Admitted, Rejected int }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	resp.Body.Close()
	assert.Equal(t, 3, st.Total)
	tr.CloseIdleConnections()

	cancel()
	require.True(t, lines.Scan())
	assert.Contains(t, lines.Text(), "total=3 admitted=2 rejected=1")
	go io.Copy(io.Discard, pr) //nolint:errcheck
	assert.NoError(t, <-errc)
}

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-algorithm", "nope"},
		{"-drift", "fast"},
		{"-dialect", "nope"},
		{"-key", "cookie"},
		{"extra"},
	} {
		assert.Error(t, run(context.Background(), args, io.Discard, io.Discard), "%q", args)
	}
}
