package headway

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPresetApply: a Preset's limits and key go to its host only (with or
// without the port, in any case, or every subdomain for "*."), its Routes
// narrow its limits by path and by request, the KeyFunc set before it keeps
// the other hosts, and a WithKey after it replaces its key. The presets of
// real APIs are tested in package preset.
func TestPresetApply(t *testing.T) {
	req := func(method, url string) *http.Request {
		r, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	host := func(r *http.Request) string { return "host:" + r.URL.Host }
	isPost := func(r *http.Request) bool { return r.Method == http.MethodPost }
	api := Preset{
		Name:   "api",
		Host:   "API.Example",
		Limits: []Limit{Per(5000, time.Hour)},
		Key:    func(r *http.Request) string { return "api:" + r.URL.Host },
		Routes: []Route{
			{PathPrefix: "/search/", Limits: []Limit{Per(30, time.Minute)}},
			{PathPrefix: "/search/code", Limits: []Limit{Per(10, time.Minute)}},
			{Match: isPost, Limits: []Limit{Per(80, time.Minute)}},
		},
	}
	shops := Preset{Name: "shops", Host: "*.shop.example", Limits: []Limit{PerSecond(2)}, Key: func(r *http.Request) string { return "shop:" + r.URL.Host }}
	docs := Preset{Name: "docs", Host: "docs.example", PathPrefix: "/v2/", Limits: []Limit{PerSecond(1)}, Key: func(r *http.Request) string { return "docs:" + r.URL.Path }}
	cfg := defaultConfig()
	for _, o := range []Option{WithKey(host), api, shops, docs} {
		o.apply(&cfg)
	}
	for _, tc := range []struct {
		req    *http.Request
		key    string
		limits []Limit
	}{
		{req("GET", "https://api.example/x"), "api:api.example", api.Limits},
		{req("GET", "https://API.EXAMPLE:443/x"), "api:API.EXAMPLE:443", api.Limits},
		{req("GET", "https://api.example/search/issues"), "api:api.example", []Limit{Per(30, time.Minute)}},
		{req("GET", "https://api.example/search/code?q=x"), "api:api.example", []Limit{Per(10, time.Minute)}},
		{req("POST", "https://api.example/issues"), "api:api.example", []Limit{Per(80, time.Minute)}},
		{req("GET", "https://acme.shop.example/x"), "shop:acme.shop.example", shops.Limits},
		{req("GET", "https://shop.example/x"), "host:shop.example", nil},
		{req("GET", "https://docs.example/v2/a"), "docs:/v2/a", docs.Limits},
		{req("GET", "https://docs.example/v1/a"), "host:docs.example", nil},
		// Other hosts keep the KeyFunc set before the presets.
		{req("GET", "https://other.example/x"), "host:other.example", nil},
	} {
		assert.Equal(t, tc.key, cfg.keyFunc(tc.req), "%s %s", tc.req.Method, tc.req.URL)
		assert.Equal(t, tc.limits, cfg.limitsFor(tc.req), "%s %s", tc.req.Method, tc.req.URL)
	}

	// A WithKey after the presets replaces their keys too.
	WithKey(host).apply(&cfg)
	assert.Equal(t, "host:api.example", cfg.keyFunc(req("GET", "https://api.example/x")))
}

func TestPresetInvalid(t *testing.T) {
	assert.PanicsWithValue(t, `headway: preset "x" has no Host`, func() { New(nil, Preset{Name: "x"}) })

	// A Preset without a Key leaves keys to the Transport's KeyFunc.
	cfg := defaultConfig()
	Preset{Name: "x", Host: "api.example", Limits: []Limit{PerSecond(1)}}.apply(&cfg)
	r, _ := http.NewRequest("GET", "https://api.example/x", nil)
	assert.Equal(t, "api.example", cfg.keyFunc(r))
}
