package sdk_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-github/v89/github"
	"golang.org/x/oauth2"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
	"github.com/headway-go/headway/preset"
)

// newGitHubServer is a fake api.github.com: 5,000 requests a fixed hour
// per token, GitHub's X-RateLimit-* headers on every response, its 403
// past the limit.
func newGitHubServer() *fakeserver.Server {
	return fakeserver.New(fakeserver.Config{
		Algorithm: fakeserver.FixedWindow, Limit: 5000, Window: time.Hour,
		Dialect: fakeserver.GitHub{}, Key: fakeserver.KeyByHeader("Authorization"),
	})
}

// listRepos gets n repositories from workers goroutines through client and
// returns how long it took.
func listRepos(t *testing.T, client *github.Client, workers, n int) time.Duration {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				_, _, err := client.Repositories.Get(context.Background(), "octo", fmt.Sprintf("repo%d", i))
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return time.Since(start)
}

// checkGitHub fails t if the server rejected a request or saw one come
// early, or if the two tokens were not paced apart: 2n requests at 5,000
// an hour take (n-1)·720 ms with a pacer per token, twice that with one.
func checkGitHub(t *testing.T, srv *fakeserver.Server, took time.Duration, n int) {
	t.Helper()
	st := srv.Stats()
	if st.Rejected != 0 || st.Early != 0 || st.Admitted != int64(2*n) {
		t.Errorf("server: %+v", st)
	}
	perToken := time.Duration(n-1) * 720 * time.Millisecond
	if took < perToken || took > perToken+perToken/10 {
		t.Errorf("%d requests per token took %v, want about %v (a pacer per token)", n, took, perToken)
	}
}

// TestGitHubAuthToken: go-github's own auth (WithAuthToken) wraps the
// Transport it is given, so headway, given as that Transport, sees the
// token of every request and keys by it.
func TestGitHubAuthToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newGitHubServer()
		tr := headway.New(srv.Transport(), preset.GitHub())
		defer tr.CloseIdleConnections()
		var clients [2]*github.Client
		for i := range clients {
			c, err := github.NewClient(github.WithTransport(tr), github.WithAuthToken(fmt.Sprintf("ghp_token%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			clients[i] = c
		}
		const n = 50
		var wg sync.WaitGroup
		var took [2]time.Duration
		for i, c := range clients {
			wg.Go(func() { took[i] = listRepos(t, c, 4, n) })
		}
		wg.Wait()
		checkGitHub(t, srv, max(took[0], took[1]), n)
	})
}

// TestGitHubOAuth2: with an oauth2 token source, headway goes below the
// oauth2.Transport (its Base), so that the Authorization header the
// transport sets is on the requests headway sees. (Above it, every token
// would share one key.)
func TestGitHubOAuth2(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newGitHubServer()
		tr := headway.New(srv.Transport(), preset.GitHub())
		defer tr.CloseIdleConnections()
		const n = 50
		var wg sync.WaitGroup
		var took [2]time.Duration
		for i := range 2 {
			ts := oauth2.StaticTokenSource(&oauth2.Token{AccessToken: fmt.Sprintf("gho_token%d", i)})
			httpClient := &http.Client{Transport: &oauth2.Transport{Source: ts, Base: tr}}
			c, err := github.NewClient(github.WithHTTPClient(httpClient))
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { took[i] = listRepos(t, c, 4, n) })
		}
		wg.Wait()
		checkGitHub(t, srv, max(took[0], took[1]), n)
	})
}
