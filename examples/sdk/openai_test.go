package sdk_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/fakeserver"
	"github.com/headway-go/headway/preset"
)

// completion is the answer of the fake chat completions endpoint.
const completion = `{"id":"chatcmpl-1","object":"chat.completion","created":1773144000,"model":"gpt-4o-mini",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"Arr."},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22}}`

// TestOpenAI: openai-go with its own retries off (headway's take their
// place, after the key's pause rather than on a timer of their own) and a
// token cost on each request's context. The account allows 10,000 tokens
// a minute; each request may use 1,000 (its max_completion_tokens, more
// than OpenAI's estimate of its prompt), so the tokens, not the 600
// requests a minute, set the pace: 10 at once, then one every 6 s. The
// fake server stands for OpenAI counting those tokens: 10 requests a
// minute, a burst of 10, OpenAI's headers and 429.
func TestOpenAI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := fakeserver.New(fakeserver.Config{
			Limit: 10, Window: time.Minute, Burst: 10, Dialect: fakeserver.OpenAI{},
			Key: fakeserver.KeyByHeader("Authorization"),
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(completion))
			}),
		})
		tr := headway.New(srv.Transport(), preset.OpenAI(600, 10_000))
		defer tr.CloseIdleConnections()
		client := openai.NewClient(
			option.WithHTTPClient(&http.Client{Transport: tr}),
			option.WithAPIKey("sk-test"),
			option.WithMaxRetries(0),
		)

		const n, maxTokens = 30, 1000
		start := time.Now()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				ctx := headway.WithCost(context.Background(), maxTokens)
				resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
					Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say arr.")},
					Model:               openai.ChatModelGPT5_4Mini,
					MaxCompletionTokens: openai.Int(maxTokens),
				})
				if err != nil {
					t.Error(err)
					return
				}
				if resp.Choices[0].Message.Content != "Arr." {
					t.Errorf("answer %q", resp.Choices[0].Message.Content)
				}
			})
		}
		wg.Wait()
		took := time.Since(start)

		st := srv.Stats()
		if st.Total != n || st.Rejected != 0 || st.Early != 0 {
			t.Errorf("server: %+v", st)
		}
		want := time.Duration(n-10) * 6 * time.Second
		if took < want || took > want+want/10 {
			t.Errorf("%d requests took %v, want about %v (paced by tokens)", n, took, want)
		}
	})
}
