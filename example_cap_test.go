package headway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
)

// A server that names a wait of a day, above the cap of a minute: the 429
// comes back at once, and while what is left of the wait is longer than
// the cap, the key's requests fail at once, unsent, with a *WaitError
// that names it, instead of waiting silently.
func ExampleWithMaxServerWait() {
	api := fakeserver.New(fakeserver.Config{Limit: 1, Window: 24 * time.Hour})
	client := &http.Client{Transport: headway.New(api.Transport(), headway.WithMaxServerWait(time.Minute))}

	for range 2 {
		code, _ := get(context.Background(), client, "http://api.example/report")
		fmt.Println(code)
	}
	_, err := get(context.Background(), client, "http://api.example/report")
	var we *headway.WaitError
	if errors.As(err, &we) && we.Stated {
		fmt.Println("the server named", we.Wait.Round(time.Hour), "above the cap of", we.Allowed)
	}
	fmt.Println(errors.Is(err, headway.ErrWaitTooLong), errors.Is(err, context.DeadlineExceeded))
	fmt.Println("sent:", api.Stats().Total)
	// Output:
	// 200
	// 429
	// the server named 24h0m0s above the cap of 1m0s
	// true false
	// sent: 2
}
