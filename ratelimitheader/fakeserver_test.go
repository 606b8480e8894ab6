package ratelimitheader

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeGet returns a GET for the fake server.
func fakeGet(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://api.test/x", nil)
	require.NoError(t, err)
	return req
}

// bodyPrefix reads what a client hands the parser of resp's body: its
// first 4 KiB.
func bodyPrefix(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	require.NoError(t, err)
	return b
}

// TestSignalsOfFakeProviders checks that what the fake server says as each
// provider, admitted or rejected, reads as that provider means it: a
// rejection is throttled, and its wait at least the one the server names.
func TestSignalsOfFakeProviders(t *testing.T) {
	for _, c := range []struct {
		dialect fakeserver.Dialect
		status  int
		limited bool // admitted responses state a quota
	}{
		{fakeserver.Gemini{}, 429, false},
		{fakeserver.Salesforce{}, 403, true},
		{fakeserver.Atlassian{}, 429, true},
		{fakeserver.HubSpot{}, 429, true},
		{fakeserver.AzureOpenAI{}, 429, true},
	} {
		t.Run(fmt.Sprintf("%T", c.dialect), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := fakeserver.New(fakeserver.Config{Limit: 3, Window: time.Minute, Burst: 3, Dialect: c.dialect})
				for i := range 4 {
					resp, err := srv.Transport().RoundTrip(fakeGet(t))
					require.NoError(t, err)
					in := &Input{Status: resp.StatusCode, Header: resp.Header, Body: bodyPrefix(t, resp)}
					resp.Body.Close()
					sig := Parse(in)
					checkInvariants(t, sig)
					if i < 3 {
						assert.Equal(t, 200, resp.StatusCode)
						assert.False(t, sig.Throttled)
						assert.Equal(t, c.limited, sig.HasRemaining, "remaining stated")
						if c.limited {
							assert.Equal(t, int64(2-i), sig.Remaining)
						}
						continue
					}
					assert.Equal(t, c.status, resp.StatusCode)
					assert.True(t, sig.Throttled, "%+v", sig)
					assert.False(t, sig.Permanent)
					assert.Empty(t, sig.Bucket, "only a rejection names it: not a bucket")
					if c.dialect.Reject(http.Header{}, fakeserver.State{RetryAfter: 20 * time.Second, Limit: 3, Window: time.Minute}).Wait > 0 {
						assert.True(t, sig.HasWait && sig.RetryAfter, "a stated delay: %+v", sig)
						assert.InDelta(t, 20, sig.Wait.Seconds(), 1, "%+v", sig)
					}
				}
			})
		})
	}
}

// TestSignalsOfFakeXRateLimitSpellings checks that each spelling and form
// of the X-RateLimit family the fake server can play reads as the server
// means it: the quota left on admitted responses, and on the rejection
// the wait it names (20 s to the next request), or the reset (60 s to a
// full quota) where it names none.
func TestSignalsOfFakeXRateLimitSpellings(t *testing.T) {
	for _, name := range []string{"x-ratelimit", "sentry", "brevo", "lemlist", "mailerlite", "akamai", "atlassian-dc"} {
		d, err := fakeserver.DialectByName(name)
		require.NoError(t, err)
		forms := []fakeserver.Dialect{d}
		if name == "x-ratelimit" {
			for _, r := range []fakeserver.ResetForm{fakeserver.ResetEpoch, fakeserver.ResetEpochMillis, fakeserver.ResetRFC3339, fakeserver.ResetJSDate} {
				forms = append(forms, fakeserver.XRateLimit{Reset: r, Wait: fakeserver.WaitReset})
			}
		}
		for i, d := range forms {
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					time.Sleep(300 * time.Millisecond) // off the second, so that rounding shows
					srv := fakeserver.New(fakeserver.Config{Limit: 3, Window: time.Minute, Burst: 3, Dialect: d})
					for i := range 4 {
						resp, err := srv.Transport().RoundTrip(fakeGet(t))
						require.NoError(t, err)
						in := &Input{Status: resp.StatusCode, Header: resp.Header, Body: bodyPrefix(t, resp), Now: time.Now()}
						resp.Body.Close()
						sig := Parse(in)
						checkInvariants(t, sig)
						require.True(t, sig.HasRemaining, "%v: %+v", resp.Header, sig)
						if i < 3 {
							assert.Equal(t, 200, resp.StatusCode)
							assert.False(t, sig.Throttled)
							assert.Equal(t, int64(2-i), sig.Remaining)
							continue
						}
						assert.Equal(t, 429, resp.StatusCode)
						assert.True(t, sig.Throttled && sig.HasWait, "%v: %+v", resp.Header, sig)
						want := 20.0
						if x, ok := d.(fakeserver.XRateLimit); ok && x.Wait == fakeserver.WaitReset {
							want = 60
						} else {
							assert.True(t, sig.RetryAfter, "a stated delay: %v: %+v", resp.Header, sig)
						}
						assert.InDelta(t, want, sig.Wait.Seconds(), 1, "%v: %+v", resp.Header, sig)
					}
				})
			})
		}
	}
}
