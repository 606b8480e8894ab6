package preset_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
	"github.com/headway-go/headway/preset"
)

// Two presets on one Transport: requests to api.notion.com are paced to
// Notion's 3 a second, those to api.stripe.com to Stripe's test mode, each
// per token, and neither holds up the other. Two fake servers, set up like
// the two APIs, stand in for them here; in a program the base would be nil
// (http.DefaultTransport). A preset can be changed before use, for an
// account whose limits differ from the published ones.
func Example() {
	// Both allow some bursts, which absorb the jitter of a real clock.
	notion := fakeserver.New(fakeserver.Config{Limit: 3, Burst: 3, Key: fakeserver.KeyByHeader("Authorization")})
	stripe := fakeserver.New(fakeserver.Config{Limit: 25, Burst: 10, Key: fakeserver.KeyByHeader("Authorization")})
	base := hostMux{"api.notion.com": notion.Transport(), "api.stripe.com": stripe.Transport()}

	github := preset.GitHub()
	github.Limits = []headway.Limit{headway.Per(15000, time.Hour)} // say, an Enterprise Cloud app

	t := headway.New(base, preset.Notion(), preset.StripeTest(), github)
	client := &http.Client{Transport: t}
	defer t.CloseIdleConnections()

	start := time.Now()
	var wg sync.WaitGroup
	send := func(url, token string) {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
			req.Header.Set("Authorization", token)
			resp, err := client.Do(req)
			if err != nil {
				fmt.Println(err)
				return
			}
			resp.Body.Close()
		})
	}
	for i := range 4 {
		send(fmt.Sprintf("https://api.notion.com/v1/pages/%d", i), "Bearer secret_1")
	}
	for i := range 10 {
		send(fmt.Sprintf("https://api.stripe.com/v1/customers/cus_%d", i), "Bearer sk_test_1")
	}
	wg.Wait()

	// Four Notion requests take at least three intervals of 1/3 s.
	fmt.Println("took at least 1s:", time.Since(start) >= time.Second)
	for name, s := range map[string]*fakeserver.Server{"notion": notion, "stripe": stripe} {
		st := s.Stats()
		fmt.Printf("%s: admitted %d, rejected %d\n", name, st.Admitted, st.Rejected)
	}
	// Unordered output:
	// took at least 1s: true
	// notion: admitted 4, rejected 0
	// stripe: admitted 10, rejected 0
}

// hostMux sends each request to the RoundTripper of its host.
type hostMux map[string]http.RoundTripper

func (m hostMux) RoundTrip(req *http.Request) (*http.Response, error) {
	return m[req.URL.Host].RoundTrip(req)
}

// An Azure OpenAI deployment with 120,000 tokens a minute gets 720
// requests a minute with them; every resource of the pattern, and every
// deployment of a resource, has keys of its own. A request's cost is the
// tokens Azure counts for it.
func ExampleAzureOpenAI() {
	p := preset.AzureOpenAI("*.openai.azure.com", 120_000)
	for _, l := range p.Limits {
		fmt.Println(l)
	}
	t := headway.New(nil, p)
	defer t.CloseIdleConnections()
	ctx := headway.WithCost(context.Background(), 1500) // max_tokens 1500, a short prompt
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost,
		"https://contoso.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21", nil)
	_ = req // client.Do(req), with client := &http.Client{Transport: t}
	// Output:
	// 720/1m0s burst 12 requests
	// 120000/1m0s burst 20000
}

// A HubSpot private app on a Professional account: 190 requests per 10 s,
// and 625,000 a day spread evenly; CRM search at 5 a second on a key of
// its own.
func ExampleHubSpot() {
	for _, l := range preset.HubSpot(190, 625_000).Limits {
		fmt.Println(l, "every", l.Interval())
	}
	// Output:
	// 190/10s every 52.631579ms
	// 625000/24h0m0s every 138.24ms
}

// A GitHub Enterprise Server whose administrator set 10,000 requests an
// hour: the keys, search and write limits stay GitHub's.
func ExampleGitHubEnterprise() {
	p := preset.GitHubEnterprise("github.example.com")
	p.Limits = []headway.Limit{headway.Per(10_000, time.Hour)}
	t := headway.New(nil, p)
	defer t.CloseIdleConnections()
	fmt.Println(p.Host, p.Limits[0].Interval())
	// Output:
	// github.example.com 360ms
}
