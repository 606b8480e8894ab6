module github.com/headway-go/headway/sharedquota

go 1.26.0

// The root module is not published yet: build against this repository's copy.
replace github.com/headway-go/headway => ../

require (
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/headway-go/headway v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	go.opentelemetry.io/otel/metric v1.47.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
