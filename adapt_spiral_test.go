package headway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/headway-go/headway/ratelimitheader"
)

// A model of a server of fixed windows, with sparse demand, that took the
// windows for a bucket and measured its rate low does not spiral down: a
// stated reset refills the model whatever the rate says, so the key sends
// its demand in every window (issue found with the fake server's jitter
// at 0: a route of a token whose global limit binds sent one request every
// 2.2 s where its windows allowed 5 a second).
//
// The server: windows of 5 a second, at whole seconds, which count a
// request 20 ms after it left and answer at once, stating the reset to
// the whole second of the server's clock (every answer, as a window's
// end is one). The key: 4 requests of the first window were throttled by
// another limit (they state no quota), then it wants wants[k] requests at
// the start of window k, no more than 2: well under the quota.
func TestSparseDemandOnWindowsDoesNotSpiralDown(t *testing.T) {
	ms := int64(time.Millisecond)
	sec := int64(time.Second)
	const windows = 40
	// stale: the throttled requests are never marked answered, and stay
	// in flight for the model (as before the key marked them), which
	// hides every answer above the model's prediction.
	for _, stale := range []bool{true, false} {
		var m serverModel
		type answer struct {
			at, sent  int64
			seq       uint64
			left      int64
			reset     int64
			throttled bool
		}
		var answers []answer
		var seq uint64
		count := make([]int64, windows+2)
		send := func(now int64, throttled bool) {
			seq++
			m.take(now, seq)
			c := now + 20*ms
			w := c / sec
			a := answer{at: c, sent: now, seq: seq, throttled: throttled}
			if !throttled {
				count[w]++
				a.left, a.reset = max(5-count[w], 0), (w+1)*sec-c
			}
			answers = append(answers, a)
		}
		deliver := func(now int64) {
			for len(answers) > 0 && answers[0].at <= now {
				a := answers[0]
				answers = answers[1:]
				if a.throttled {
					// What the key does with a throttle of another limit
					// (a global one) on a bucket's request.
					if !stale {
						m.answeredDep(a.seq)
					}
					m.correct(now, a.sent, 1)
					continue
				}
				m.secondReset = true
				m.observe(now, a.seq, seq, &ratelimitheader.Signal{HasRemaining: true, Remaining: a.left, Reset: time.Duration(a.reset)})
			}
		}
		send(0, false)
		deliver(20 * ms)
		for range 4 {
			send(20*ms, true)
		}
		sent := make([]int, windows+1)
		wants := []int{0, 1, 2, 2} // then 2 a window
		want := 0                  // wanted and not sent yet
		for k := 1; k <= windows; k++ {
			if k < len(wants) {
				want += wants[k]
			} else {
				want += 2
			}
			for now := int64(k) * sec; now < int64(k+1)*sec && want > 0; now += ms {
				deliver(now)
				for want > 0 && m.earliest(now, 1) <= now {
					send(now, false)
					sent[k]++
					want--
				}
			}
			deliver(int64(k+1) * sec)
		}
		for k := 3; k <= windows; k++ {
			assert.Equal(t, 2, sent[k], "stale %v, window %d: the demand, well within the quota, no drift (sent %v)", stale, k, sent)
		}
		assert.Zero(t, want, "stale %v: requests still waiting after %d windows", stale, windows)
		for k := 1; k <= windows; k++ {
			assert.LessOrEqual(t, count[k], int64(5), "stale %v, window %d: over the quota", stale, k)
		}
	}
}
