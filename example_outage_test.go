package headway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
)

// A batch job meets a 300ms outage of 500s. With a breaker that holds, the
// key sends one probe at a time while the host is down, the other requests
// wait in its queue, and every record gets through once the host is back.
// A request that cannot wait for the next probe fails at once, saying when
// it goes.
func ExampleBreakerSettings_hold() {
	api := fakeserver.New(fakeserver.Config{Limit: 1000, Burst: 100})
	now := time.Now()
	api.SetOutage(now, now.Add(300*time.Millisecond))

	t := headway.New(api.Transport(),
		headway.WithRetry(headway.RetryOptions{MaxAttempts: 30, Statuses: []int{500, 502, 503, 504}}),
		headway.WithBreaker(headway.BreakerSettings{Timeout: 100 * time.Millisecond, Hold: true}))
	client := &http.Client{Transport: t}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		ok     int
		failed int
	)
	for i := range 20 {
		wg.Go(func() {
			code, err := get(context.Background(), client, fmt.Sprintf("http://api.example/records/%d", i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil || code != http.StatusOK {
				failed++
				return
			}
			ok++
		})
	}
	for api.Stats().Outage == 0 {
		time.Sleep(time.Millisecond) // until the first request met the outage
	}
	time.Sleep(10 * time.Millisecond)

	// A request with 1ms to live cannot wait for the next probe.
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err := get(ctx, client, "http://api.example/records/urgent")
	var we *headway.WaitError
	fmt.Println("urgent request:", errors.As(err, &we) && !we.NextProbe.IsZero())

	wg.Wait()
	fmt.Printf("ok %d, failed %d, sent during the outage: at most 10: %v\n",
		ok, failed, api.Stats().Outage <= 10)
	// It prints the following, which TestExampleBreakerSettings_hold
	// checks in virtual time: in real time, a loaded machine that stalls
	// the process past the outage's end lets the host come back before
	// the urgent request.
	//
	//	urgent request: true
	//	ok 20, failed 0, sent during the outage: at most 10: true
}
