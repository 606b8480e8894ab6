// Package sdk shows headway inside the SDKs programs use to reach an API,
// each example a test run by go test against the fake server speaking
// that provider's dialect, in virtual time:
//
//   - GitHub through google/go-github, the token given to go-github
//     (WithAuthToken) or to an oauth2.Transport; either way headway sits
//     below the auth, so that it sees the token its keys are made of.
//   - OpenAI through openai/openai-go, its own retries off (headway's take
//     their place) and each request's token cost given with
//     headway.WithCost on the context the SDK call takes.
//
// The SDKs are dependencies of this examples module only, never of
// headway's.
package sdk
