package headway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
)

// get sends a GET to url through c and drains and closes the response body.
func get(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// Twenty concurrent requests to an API that admits 50 a second in bursts of
// 10, paced by headway a little below that limit: none is rejected. The
// fake server runs in memory, without a network.
func ExampleNew() {
	api := fakeserver.New(fakeserver.Config{Limit: 50, Burst: 10})

	t := headway.New(api.Transport(), headway.WithLimit(headway.PerSecond(40).WithBurst(5)))
	client := &http.Client{Transport: t}
	defer t.CloseIdleConnections()

	start := time.Now()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
	)
	for i := range 20 {
		wg.Go(func() {
			code, err := get(context.Background(), client, fmt.Sprintf("http://api.example/items/%d", i))
			if err != nil {
				fmt.Println(err)
				return
			}
			mu.Lock()
			statuses[code]++
			mu.Unlock()
		})
	}
	wg.Wait()

	// 5 leave at once, the other 15 one every 25ms: pacing never runs
	// faster than the limit, so this lower bound always holds.
	fmt.Println("statuses:", statuses)
	fmt.Println("took at least 375ms:", time.Since(start) >= 375*time.Millisecond)
	st := api.Stats()
	fmt.Printf("server: admitted %d, rejected %d, early %d\n", st.Admitted, st.Rejected, st.Early)
	// It prints the following, which TestExampleNew checks in virtual time:
	// in real time, a loaded machine that stalls the process wakes the
	// paced requests together, and the server in the same process sees
	// them at once.
	//
	//	statuses: map[200:20]
	//	took at least 375ms: true
	//	server: admitted 20, rejected 0, early 0
}

// An LLM API that limits both requests and tokens per minute: every request
// spends one unit of the request limit and its cost, the tokens it will
// use, of the token limit. A request that could never fit fails at once,
// without being sent.
func ExampleWithCost() {
	api := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000})
	t := headway.New(api.Transport(), headway.WithLimit(
		headway.Per(500, time.Minute).WithBurst(50).Requests(), // requests per minute
		headway.Per(30000, time.Minute).WithBurst(3000),        // tokens per minute
	))
	client := &http.Client{Transport: t}
	ctx := context.Background()

	code, err := get(headway.WithCost(ctx, 1200), client, "http://llm.example/v1/chat")
	fmt.Println(code, err)

	_, err = get(headway.WithCost(ctx, 8000), client, "http://llm.example/v1/chat")
	var ce *headway.CostError
	if errors.As(err, &ce) {
		fmt.Println(errors.Is(err, headway.ErrCostTooLarge), ce.Cost, ce.Limit)
	}

	_, err = get(headway.WithCost(ctx, -1), client, "http://llm.example/v1/chat")
	fmt.Println(errors.Is(err, headway.ErrInvalidCost))

	fmt.Println("sent:", api.Stats().Total)
	// Output:
	// 200 <nil>
	// true 8000 30000/1m0s burst 3000
	// true
	// sent: 1
}

// WithCostFunc prices requests whose context carries no cost: here a
// GraphQL API that charges 10 points for a mutation and 1 for a query.
func ExampleWithCostFunc() {
	api := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000})
	t := headway.New(api.Transport(),
		headway.WithLimit(headway.PerSecond(10).WithBurst(10)),
		headway.WithCostFunc(func(req *http.Request) int {
			if req.Header.Get("X-Operation") == "mutation" {
				return 10
			}
			return 1
		}),
	)
	client := &http.Client{Transport: t}

	req, _ := http.NewRequest(http.MethodPost, "http://graphql.example/", nil)
	req.Header.Set("X-Operation", "mutation")
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	// The mutation spent the whole burst: a query with a deadline shorter
	// than the refill fails at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = get(ctx, client, "http://graphql.example/")
	fmt.Println(resp.StatusCode, errors.Is(err, headway.ErrWaitTooLong))
	// Output:
	// 200 true
}

// A Limit prints in a short form and knows the spacing of its units.
func ExamplePerSecond() {
	l := headway.PerSecond(50).WithBurst(10)
	fmt.Println(l, l.Interval())

	fmt.Println(headway.Every(1500*time.Millisecond), headway.Every(1500*time.Millisecond).Interval())
	fmt.Println(headway.Per(5000, time.Hour).Requests(), headway.Per(5000, time.Hour).Interval())
	fmt.Println(headway.Per(3, time.Second).Interval()) // rounded up: never faster than the limit
	// Output:
	// 50/1s burst 10 20ms
	// 1/1.5s 1.5s
	// 5000/1h0m0s requests 720ms
	// 333.333334ms
}

// A request whose wait for its slot is longer than its deadline fails at
// once, without being sent and without waiting for the deadline.
func ExampleWaitError() {
	api := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000})
	t := headway.New(api.Transport(), headway.WithLimit(headway.Every(time.Minute)))
	client := &http.Client{Transport: t}

	code, _ := get(context.Background(), client, "http://api.example/a") // spends the minute's unit
	fmt.Println(code)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := get(ctx, client, "http://api.example/b")

	fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.Is(err, headway.ErrWaitTooLong))
	var we *headway.WaitError
	if errors.As(err, &we) {
		fmt.Println("wait:", we.Wait.Round(time.Second), "allowed at most 1s:", we.Allowed <= time.Second)
	}
	fmt.Println("sent:", api.Stats().Total)
	// Output:
	// 200
	// true true
	// wait: 1m0s allowed at most 1s: true
	// sent: 1
}

// One pacer per API token: each token has its own limit and queue, and one
// token's traffic never delays another's. Without a queue (MaxLen < 0), a
// request that cannot leave at once fails with ErrQueueFull.
func ExampleKeyByHeader() {
	api := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 1000})
	t := headway.New(api.Transport(),
		headway.WithLimit(headway.Every(time.Minute)),
		headway.WithKey(headway.KeyByHeader("Authorization")),
		headway.WithQueue(headway.QueueOptions{MaxLen: -1}),
	)
	client := &http.Client{Transport: t}

	send := func(token string) {
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/me", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(token, errors.Is(err, headway.ErrQueueFull))
			return
		}
		resp.Body.Close()
		fmt.Println(token, resp.StatusCode)
	}
	send("alice")
	send("alice")
	send("bob")
	// Output:
	// alice 200
	// alice true
	// bob 200
}

// A final 429 is a response, not an error: headway hands it back as it came,
// for the caller to read. Here the server admits less than the client was
// told, and the third request is rejected.
func ExampleTransport_RoundTrip() {
	api := fakeserver.New(fakeserver.Config{Limit: 1, Window: time.Minute, Burst: 2})
	// A throttled request is sent again after the wait the server names,
	// unless that wait is longer than the cap of WithMaxServerWait: then
	// the 429 comes back at once, as a response.
	t := headway.New(api.Transport(),
		headway.WithLimit(headway.Per(60, time.Minute).WithBurst(3)),
		headway.WithMaxServerWait(10*time.Second))
	client := &http.Client{Transport: t}

	for range 3 {
		resp, err := client.Get("http://api.example/items")
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Printf("%d Retry-After: %q\n", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 Retry-After: ""
	// 200 Retry-After: ""
	// 429 Retry-After: "60"
}
