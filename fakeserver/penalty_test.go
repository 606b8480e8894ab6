package fakeserver

import (
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// penaltyGet sends one GET to s in memory and returns its status, its
// Retry-After and its body.
func penaltyGet(t *testing.T, s *Server) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://fake.test/", nil)
	resp, err := s.Transport().RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

// TestPenaltyBlock plays a block of 60 s on a limit of one a second, under
// every algorithm, with each statement and with or without extension.
func TestPenaltyBlock(t *testing.T) {
	rows := []struct {
		states BlockStatement
		extend bool
		// What the rejection at 0 s and the one at 30 s say.
		first, during string
		// The status at 61 s: 200 unless the request at 30 s restarted
		// the block (until 90 s).
		at61 int
	}{
		{StateBlockEnd, false, "60", "30", 200},
		{StateBlockEnd, true, "60", "60", 429},
		{StateWindow, false, "1", "1", 200},
		{StateWindow, true, "1", "1", 429},
		{StateNothing, false, "", "", 200},
		{StateNothing, true, "", "", 429},
	}
	for _, alg := range []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingWindow} {
		for _, r := range rows {
			name := alg.String() + "/" + r.states.String()
			if r.extend {
				name += "/extended"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := New(Config{Algorithm: alg, Limit: 1, Window: time.Second,
						Penalty: Penalty{Block: time.Minute, BlockStates: r.states, Extend: r.extend}})
					// Start on a whole second: the fixed window's boundaries.
					time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
					code, _, _ := penaltyGet(t, s)
					require.Equal(t, 200, code)
					code, ra, body := penaltyGet(t, s)
					assert.Equal(t, 429, code)
					assert.Equal(t, r.first, ra, "the rejection that begins the block")
					if r.states == StateNothing {
						assert.Empty(t, body)
					}
					time.Sleep(30 * time.Second)
					code, ra, _ = penaltyGet(t, s)
					assert.Equal(t, 429, code, "blocked, though the limit has room")
					assert.Equal(t, r.during, ra)
					time.Sleep(31 * time.Second)
					code, _, _ = penaltyGet(t, s)
					assert.Equal(t, r.at61, code)
					st := s.Stats()
					assert.EqualValues(t, 1, st.Rejected, "the rejection that began the block")
					assert.EqualValues(t, 2-b2i(r.at61 == 200), st.Blocked)
					assert.EqualValues(t, 1+b2i(r.at61 == 200), st.Admitted)
					assert.Equal(t, st.Total, st.Admitted+st.Rejected+st.Blocked)
					if r.extend {
						time.Sleep(60 * time.Second)
						code, _, _ = penaltyGet(t, s)
						assert.Equal(t, 200, code, "a minute after the last request")
					}
				})
			})
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestPenaltyBan bans a key after 3 violations within a minute, for 5
// minutes, with and without Retry-After, a body and extension.
func TestPenaltyBan(t *testing.T) {
	rows := []struct {
		name string
		pen  Penalty
		ra   string
		body string
	}{
		{"403-bare", Penalty{BanAfter: 3}, "", ""},
		{"403-retry-after-body", Penalty{BanAfter: 3, BanRetryAfter: true,
			BanBody: `{"message":"You have exceeded a secondary rate limit."}`}, "300",
			`{"message":"You have exceeded a secondary rate limit."}` + "\n"},
		{"429-extended", Penalty{BanAfter: 3, BanStatus: 429, Extend: true, BanRetryAfter: true}, "300", ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Limit: 1, Penalty: r.pen})
				wantBan := r.pen.BanStatus
				if wantBan == 0 {
					wantBan = 403
				}
				code, _, _ := penaltyGet(t, s)
				require.Equal(t, 200, code)
				// Three rejections 10 s apart each: the third bans the key.
				for i := range 3 {
					code, _, _ := penaltyGet(t, s)
					assert.Equal(t, 429, code, "violation %d", i+1)
					time.Sleep(10 * time.Second)
					penaltyGet(t, s) // admitted: the bucket refilled
				}
				st := s.Stats()
				assert.EqualValues(t, 3, st.Rejected)
				assert.EqualValues(t, 3, st.Admitted, "the two between the violations")
				assert.EqualValues(t, 1, st.Banned, "10 s after the third violation, at 30 s")
				assert.EqualValues(t, 1, st.Bans)
				time.Sleep(2 * time.Minute) // at 150 s
				code, ra, body := penaltyGet(t, s)
				assert.Equal(t, wantBan, code)
				if r.ra != "" {
					want := "170" // until 320 s
					if r.pen.Extend {
						want = "300"
					}
					assert.Equal(t, want, ra)
				} else {
					assert.Empty(t, ra)
				}
				assert.Equal(t, r.body, body)
				time.Sleep(3 * time.Minute) // at 330 s
				code, _, _ = penaltyGet(t, s)
				if r.pen.Extend {
					assert.Equal(t, wantBan, code, "the request at 150 s restarted the ban")
					time.Sleep(5 * time.Minute)
					code, _, _ = penaltyGet(t, s)
				}
				assert.Equal(t, 200, code, "the ban is over")
				st = s.Stats()
				assert.Equal(t, st.Total, st.Admitted+st.Rejected+st.Banned+st.Blocked)
			})
		})
	}
}

func TestParseBlockStatement(t *testing.T) {
	for _, b := range []BlockStatement{StateBlockEnd, StateWindow, StateNothing} {
		got, err := ParseBlockStatement(b.String())
		require.NoError(t, err)
		assert.Equal(t, b, got)
	}
	_, err := ParseBlockStatement("later")
	assert.ErrorContains(t, err, "unknown block statement")
	assert.Equal(t, "BlockStatement(9)", BlockStatement(9).String())
}

// A block's rejection that states its end tells it (WaitHeader), as any
// rejection that names a wait does, and so does a ban's Retry-After: an
// Observer counts what a client sends into a block or a ban it had read
// of. A block that states nothing tells nothing.
func TestPenaltyTellsItsWaits(t *testing.T) {
	rows := []struct {
		name string
		pen  Penalty
		told bool
		// known is what was sent into a wait already read of at 2 s:
		// only a block that stated its end at once covers it.
		known int64
	}{
		{"block-end", Penalty{Block: time.Minute}, true, 1},
		{"window", Penalty{Block: time.Minute, BlockStates: StateWindow}, true, 0},
		{"nothing", Penalty{Block: time.Minute, BlockStates: StateNothing}, false, 0},
		{"ban-retry-after", Penalty{BanAfter: 1, BanRetryAfter: true}, true, 0},
		{"ban-bare", Penalty{BanAfter: 1}, false, 0},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Limit: 1, Penalty: r.pen, TellWaits: true})
				o := NewObserver(s, s.Transport())
				send := func() *http.Response {
					req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
					resp, err := o.RoundTrip(req)
					require.NoError(t, err)
					resp.Body.Close()
					return resp
				}
				require.Equal(t, http.StatusOK, send().StatusCode)
				send()                      // rejected: begins the block, or the ban
				time.Sleep(2 * time.Second) // past the limiter's own wait
				resp := send()              // into the block or the ban
				require.NotEqual(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, r.known, o.Known())
				send() // at once, into the wait resp named
				if r.told {
					assert.NotEmpty(t, resp.Header.Get(WaitHeader))
					assert.Equal(t, r.known+1, o.Known(), "sent into a wait it had read of")
				} else {
					assert.Empty(t, resp.Header.Get(WaitHeader))
					assert.Equal(t, r.known, o.Known())
				}
			})
		})
	}
}
