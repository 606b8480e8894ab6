package headway_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
)

// A Preset for an API of your own: 20 requests a second per token, and
// its export endpoints 2 a minute per token, on one host, while requests
// to other hosts keep the Transport's limits. Package preset holds the
// presets of well-known APIs (GitHub, Stripe, OpenAI and more), built the
// same way.
func ExamplePreset() {
	inventory := headway.Preset{
		Name:   "inventory",
		Host:   "inventory.example",
		Limits: []headway.Limit{headway.PerSecond(20).WithBurst(5)},
		Key:    headway.KeyByHeader("Authorization"),
		Routes: []headway.Route{
			{PathPrefix: "/export/", Limits: []headway.Limit{headway.Per(2, time.Minute)}},
		},
	}
	srv := fakeserver.New(fakeserver.Config{Limit: 20, Burst: 5})
	c := &http.Client{Transport: headway.New(srv.Transport(), inventory)}
	for _, url := range []string{"https://inventory.example/items/1", "https://inventory.example/export/all"} {
		status, err := get(context.Background(), c, url)
		fmt.Println(status, err)
	}
	// Output:
	// 200 <nil>
	// 200 <nil>
}
