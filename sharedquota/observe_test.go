package sharedquota

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/metrictest"
	"github.com/redis/go-redis/v9"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestFallbacksAreCountedAndLogged reserves against a Redis that is not
// there: every reservation falls back, the degraded counter says so, and
// the fall is logged once, at Info, without the key.
func TestFallbacksAreCountedAndLogged(t *testing.T) {
	mp := metrictest.NewProvider()
	var buf lockedBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	q := NewRedis(c, WithMeterProvider(mp), WithLogger(log), WithHeartbeat(time.Hour))
	defer q.Close()

	const key = "api.test\x00Bearer SECRET"
	for range 3 {
		if _, err := q.Reserve(context.Background(), key, []headway.Limit{headway.PerSecond(100)}, 1, forever); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int64{}
	for _, m := range mp.Collect(context.Background()) {
		if m.Kind == metrictest.Sum && len(m.Points) == 1 {
			got[m.Name] = int64(m.Points[0].Value)
		}
	}
	if got["headway.sharedquota.degraded"] != 3 || got["headway.sharedquota.reservations"] != 3 {
		t.Errorf("metrics %v, want 3 reservations, all degraded", got)
	}
	// The fall may be logged by the heartbeat's first round, which runs
	// beside the reservations and may have marked Redis down (so that they
	// fell back) and not yet written its record: Close waits for it.
	q.Close()
	out := buf.String()
	if n := strings.Count(out, "Redis unavailable"); n != 1 || !strings.Contains(out, "mode=fallback") {
		t.Errorf("log:\n%s\nwant one record of the fall, with its mode", out)
	}
	if strings.Contains(out, "SECRET") {
		t.Error("the log shows the key")
	}
}
