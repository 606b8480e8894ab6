package bench

import (
	"context"
	"net/http"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/headway-go/headway"
)

// nopRT answers every request with the same response and allocates
// nothing, so a benchmark measures only what wraps it.
type nopRT struct{ resp *http.Response }

func (n nopRT) RoundTrip(*http.Request) (*http.Response, error) { return n.resp, nil }

// BenchmarkOverheadMetrics is the root package's BenchmarkOverhead first
// case (one key far below its limit) with metrics on, in an OpenTelemetry
// SDK MeterProvider, without key or host attributes. It lives here so that
// the SDK stays out of the library's module.
func BenchmarkOverheadMetrics(b *testing.B) {
	far := headway.PerSecond(1_000_000_000).WithBurst(1000)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	base := nopRT{resp: &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://host0.test/path", nil)
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, parallel bool) {
		tr := headway.New(base, headway.WithLimit(far), headway.WithMeterProvider(mp))
		b.ReportAllocs()
		if !parallel {
			for b.Loop() {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
			return
		}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	b.Run("headway/1key", func(b *testing.B) { run(b, false) })
	b.Run("headway/1key/parallel", func(b *testing.B) { run(b, true) })
}
