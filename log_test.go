package headway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

// syncBuffer is a bytes.Buffer safe for the handler's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestLogNeverShowsCredentials runs throttled requests keyed by their
// Authorization header, with a token in the query too, and a breaker that
// opens, through a Debug logger: the records name the key by its hash and
// the request by host and path, never the token.
func TestLogNeverShowsCredentials(t *testing.T) {
	const token, query = "Bearer tok-SECRET-123", "api_key=q-SECRET-456"
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		t.Run(level.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var buf syncBuffer
				log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
				srv := fakeserver.New(fakeserver.Config{Limit: 1, Window: time.Second, Burst: 1})
				tr := New(srv.Transport(), WithLogger(log), WithKey(KeyByHeader("Authorization")),
					WithLimit(PerSecond(100).WithBurst(2)))
				for i := range 3 {
					req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://user:pw@api.test/items/%d?%s", i, query), nil)
					req.Header.Set("Authorization", token)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
				}
				out := buf.String()
				t.Log("\n" + out)
				for _, secret := range []string{"SECRET", "api_key", "pw@", "?"} {
					if strings.Contains(out, secret) {
						t.Errorf("the log shows %q", secret)
					}
				}
				id := keyID("api.test\x00" + token)
				wants := []string{"msg=\"headway: paused\"", "key=" + id, "host=api.test", "scope=key", "wait=1s"}
				if level == slog.LevelDebug {
					wants = append(wants, "msg=\"headway: throttled\"", "msg=\"headway: retry\"",
						"msg=\"headway: admitted\"", "path=/items/1", "status=429")
				} else if strings.Contains(out, "level=DEBUG") {
					t.Error("Debug records at Info")
				}
				for _, want := range wants {
					if !strings.Contains(out, want) {
						t.Errorf("the log lacks %s", want)
					}
				}
			})
		})
	}
}

func TestLogRejectionsAndBreakerChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		stub := &stubRT{status: http.StatusServiceUnavailable}
		tr := New(stub, WithLogger(log), WithRetry(RetryOptions{MaxAttempts: 1}),
			WithBreaker(BreakerSettings{ConsecutiveFailures: 1}))
		for range 2 {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/x?sig=SECRET", nil)
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}
		out := buf.String()
		t.Log("\n" + out)
		for _, want := range []string{
			`level=INFO msg="headway: breaker state changed" key=` + keyID("api.test") + " host=api.test from=closed to=open",
			`msg="headway: rejected"`, "reason=circuit_open",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the log lacks %s", want)
			}
		}
		if strings.Contains(out, "SECRET") {
			t.Error("the log shows the query")
		}
	})
}

func TestErrAttrDropsTheURL(t *testing.T) {
	err := &url.Error{Op: "Get", URL: "http://api.test/?token=SECRET", Err: errors.New("connection reset")}
	if got := errAttr(fmt.Errorf("wrapped: %w", err)).Value.String(); got != "connection reset" {
		t.Errorf("errAttr = %q", got)
	}
	if got := errAttr(context.Canceled).Value.String(); got != "context canceled" {
		t.Errorf("errAttr = %q", got)
	}
}
