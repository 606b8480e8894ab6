package fakeserver

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func BenchmarkLimiters(b *testing.B) {
	for _, alg := range []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingWindow} {
		b.Run(alg.String(), func(b *testing.B) {
			cfg := Config{Algorithm: alg, Limit: 1000, Burst: 100}.withDefaults()
			lim := newLimiter(&cfg)
			now := t0.UnixNano()
			b.ReportAllocs()
			for b.Loop() {
				now += int64(time.Millisecond) / 2
				lim.take(now)
			}
		})
	}
}

func BenchmarkServeHTTP(b *testing.B) {
	s := New(Config{Limit: 1 << 30, Burst: 1 << 20, Dialect: IETF{}})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest(http.MethodGet, "/items/1", nil)
		for pb.Next() {
			s.ServeHTTP(httptest.NewRecorder(), req)
		}
	})
}
