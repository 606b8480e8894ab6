// Package ratelimitheader reads what an HTTP response says about rate
// limiting: whether it rejected the request (a 429, a 503, a vendor's 403,
// a 418 ban), how long to wait before the next request (Retry-After and its
// variants, the reset of an exhausted quota), and what quota is left (the IETF
// RateLimit and RateLimit-Policy fields, drafts -06 to -11, and the vendor
// dialects: X-RateLimit-* in its many spellings and scopes, GitHub, Discord,
// OpenAI, Anthropic, Shopify, HubSpot, Zendesk, Stripe, Google APIs,
// Salesforce, Atlassian, Linear, Azure's resource providers, Etsy, Xero,
// Yelp, Discogs, Contentful, Riot Games' <limit>:<seconds> windows,
// LaunchDarkly, Trakt's JSON X-Ratelimit, Split, Bybit, Datadog, Auth0's
// token quotas), and the delays a 429's body states (Discord, Telegram,
// Dropbox, monday.com, Zulip's retry-after, Mailgun's retry-seconds: retry,
// after or in, and a unit, in any spelling), in seconds or, where the
// response's spent window shows it, in milliseconds (PluralKit, Discord
// before API v8), or in milliseconds by name (Matrix's retry_after_ms). Of
// several windows, a spent one governs the wait, and the one with the fewest
// left is the quota reported.
//
// What one response cannot tell, several can: a bare reset in
// milliseconds (Prisjakt's X-Rate-Limit-Reset: 600000) read as seconds falls
// a thousand times faster than the clock (ResetsFall), and a server whose
// 429 showed its delays in milliseconds states them so where nothing shows
// it (Discord's global limit before v8; Signal.MillisecondDelay). A client
// that learned it says so with Input.MillisecondResets and
// Input.MillisecondDelays; package headway's Transport does, per host.
//
// It is pure: Parse and Parser.Parse take the status, the header, a prefix
// of the body and the clocks, and return a Signal; they never block, never
// keep their input and never panic on malformed fields, which they ignore.
// It imports nothing of headway, and serves any Go HTTP client:
//
//	in := &ratelimitheader.Input{Status: resp.StatusCode, Header: resp.Header, Now: time.Now()}
//	if resp.StatusCode >= 400 {
//		in.Body, _ = io.ReadAll(io.LimitReader(resp.Body, 4<<10)) // a prefix is enough
//	}
//	sig := ratelimitheader.Parse(in)
//	if sig.Throttled && sig.HasWait && !sig.Permanent && !sig.OverMaxServerWait {
//		time.Sleep(sig.Wait) // then send the request again
//	}
//
// A Parser with more Dialect values reads other vendors' fields. Package
// headway's Transport parses every response with it.
package ratelimitheader
