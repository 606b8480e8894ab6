package headway

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A probe whose body cannot be read is not sent, and its departure is
// settled like any unsent one: the key's next request probes in its place.
// Before, the probe stayed in flight for good and the key sent nothing more.
func TestAProbeWhoseBodyFailsLetsTheNextRequestProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &stepRT{steps: []step{{status: 503}, {status: 200}}}
		tr := New(base)
		resp, err := tr.RoundTrip(mustPost(t)) // a POST: a bare 503 is not retried
		require.NoError(t, err)
		drain(resp)
		require.True(t, tr.keys.get("api.test", tr, mustPost(t)).isDown(), "a bare 503: the host is down")

		req, body := newUnknownLenReq(t, "abc")
		body.err = errors.New("disk on fire")
		_, err = tr.RoundTrip(req) // waits for the probe's turn, then fails to read
		assert.ErrorIs(t, err, body.err)
		assert.Equal(t, int64(1), body.closes.Load())
		assert.Len(t, base.sent, 1, "not sent")

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		get, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/x", nil)
		require.NoError(t, err)
		resp, err = tr.RoundTrip(get)
		require.NoError(t, err, "the next request probes")
		drain(resp)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Len(t, base.sent, 2)
	})
}
