package headway_test

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
)

// Hooks report the events a program may act on. Here a server that admits
// one request a second answers the second request with a 429 and
// Retry-After: 1; headway pauses the key, reports the throttle, the pause
// and the retry, and sends the request again when the pause is over.
func ExampleWithHooks() {
	api := fakeserver.New(fakeserver.Config{Limit: 1, Window: time.Second, Burst: 1})
	t := headway.New(api.Transport(), headway.WithHooks(headway.Hooks{
		OnThrottle: func(e headway.ThrottleEvent) {
			fmt.Printf("throttled: %d, wait %v\n", e.Status, e.Wait)
		},
		OnPause: func(e headway.PauseEvent) { fmt.Println("paused") },
		OnRetry: func(e headway.RetryEvent) { fmt.Printf("retry: attempt %d\n", e.Attempt) },
	}))
	client := &http.Client{Transport: t}
	for range 2 {
		resp, err := client.Get("http://api.example/items")
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 200
	// throttled: 429, wait 1s
	// paused
	// retry: attempt 2
	// 200
}
