// Package fakeserver is a fake rate-limited HTTP API, for testing,
// benchmarking and demonstrating HTTP clients that must respect rate limits.
//
// A Server admits requests with one of six exact limiter algorithms
// (TokenBucket, LeakyBucket, FixedWindow, SlidingWindow,
// SlidingWindowCounter, AnchoredWindow), on a clock that may be skewed and
// drift (Config.ClockSkew, Config.ClockDrift), answers the rest
// as a real provider would (see Dialect: bare 429s, Retry-After, the IETF
// RateLimit headers, GitHub, OpenAI, Shopify, Discord), can fail on purpose
// (see Faults and Server.SetOutage), and counts what it did (see Stats and
// Server.PeakRate), so that a test can assert that a client was neither
// rejected nor early.
//
// Every decision is a pure function of the server's clock, Config.Now, so a
// test with an injected clock, or inside a testing/synctest bubble with
// Server.Transport, is exact and repeatable.
//
// In a test:
//
//	srv := fakeserver.New(fakeserver.Config{Limit: 50, Burst: 10})
//	client := &http.Client{Transport: srv.Transport()} // in memory
//	// ... run the client ...
//	st := srv.Stats()
//	if st.Rejected > 0 || st.Early > 0 || srv.PeakRate(time.Second) > 60 {
//		t.Errorf("client overran the server: %+v", st)
//	}
//
// Over a real loopback connection, for examples and benchmarks:
//
//	fs, err := fakeserver.Start(fakeserver.Config{Limit: 50, Burst: 10})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer fs.Close()
//	resp, err := http.Get(fs.URL + "/items/1")
//
// Or as a separate process, whose counters are served as JSON at /_stats:
//
//	go run ./fakeserver/cmd/fakeserver -rate 50 -burst 10 -dialect ietf
//
// This package does not import the headway client library.
package fakeserver
