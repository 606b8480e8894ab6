package fakeserver_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/headway-go/headway/fakeserver"
)

func Example() {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	srv := fakeserver.New(fakeserver.Config{
		Limit: 50, // per second
		Burst: 2,
		Now:   func() time.Time { return now },
	})
	for range 3 {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/items/1", nil))
		fmt.Printf("%d Retry-After=%q\n", rec.Code, rec.Header().Get("Retry-After"))
	}
	now = now.Add(time.Second) // obey Retry-After
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/items/1", nil))
	fmt.Println(rec.Code)
	fmt.Printf("%+v\n", srv.Stats())
	// Output:
	// 200 Retry-After=""
	// 200 Retry-After=""
	// 429 Retry-After="1"
	// 200
	// {Total:4 Admitted:3 Rejected:1 Early:0 Ignored:0 Outage:0 Errors:0 Resets:0 Blocked:0 Banned:0 Bans:0}
}

func ExampleStart() {
	fs, err := fakeserver.Start(fakeserver.Config{Limit: 50, Burst: 10})
	if err != nil {
		panic(err)
	}
	defer fs.Close()
	c := fs.Client()
	for range 12 {
		resp, err := c.Get(fs.URL + "/items")
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
	}
	st := fs.Server.Stats()
	fmt.Println(st.Total, st.Admitted >= 10)
	// Output: 12 true
}

func ExampleIETF() {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	srv := fakeserver.New(fakeserver.Config{
		Algorithm: fakeserver.FixedWindow,
		Limit:     2,
		Window:    time.Minute,
		Dialect:   fakeserver.IETF{},
		Now:       func() time.Time { return now },
	})
	now = now.Add(15 * time.Second)
	for range 3 {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		h := rec.Header()
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", rec.Code, h.Get("RateLimit"), h.Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "default";r=1;t=45 Retry-After: ""
	// 200 RateLimit: "default";r=0;t=45 Retry-After: ""
	// 429 RateLimit: "default";r=0;t=45 Retry-After: "45"
}

func ExampleServer_SetOutage() {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	srv := fakeserver.New(fakeserver.Config{
		Limit: 100,
		Now:   func() time.Time { return now },
		Faults: fakeserver.Faults{
			OutageStatus: http.StatusServiceUnavailable,
		},
	})
	srv.SetOutage(now, now.Add(5*time.Second))
	for range 3 {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Println(now.Format(time.TimeOnly), rec.Code)
		now = now.Add(3 * time.Second)
	}
	fmt.Println("outage:", srv.Stats().Outage)
	// Output:
	// 12:00:00 503
	// 12:00:03 503
	// 12:00:06 200
	// outage: 2
}

// A host that resets every connection for a second: the in-memory
// Transport returns ErrConnReset, as a real reset would surface, and the
// requests that arrived during the outage are counted.
func ExampleOutageShape() {
	srv := fakeserver.New(fakeserver.Config{Faults: fakeserver.Faults{Outage: fakeserver.OutageReset}})
	now := time.Now()
	srv.SetOutage(now, now.Add(time.Second))
	client := &http.Client{Transport: srv.Transport()}
	_, err := client.Get("http://api.example/")
	fmt.Println(errors.Is(err, fakeserver.ErrConnReset))
	fmt.Println("outage:", srv.Stats().Outage)
	// Output:
	// true
	// outage: 1
}

// An Observer under a client that retries a 429 at once: the first 429
// could not be known when its request left; the retry was sent after it.
func ExampleObserver() {
	srv := fakeserver.New(fakeserver.Config{Limit: 1, Window: time.Minute, TellWaits: true})
	obs := fakeserver.NewObserver(srv, srv.Transport())
	client := &http.Client{Transport: obs}
	for range 3 {
		resp, err := client.Get("http://api.test/items")
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	fmt.Printf("throttled %d, sent inside a known wait %d\n", obs.Throttled(), obs.Known())
	// Output:
	// 200
	// 429
	// 429
	// throttled 2, sent inside a known wait 1
}
