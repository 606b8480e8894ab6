// Package preset has the rate limits of well-known APIs, each a
// [headway.Preset]: the limits its provider publishes, on the host it
// serves, with requests keyed as the provider counts them (per token, per
// route). A Preset is an Option, and one Transport carries several:
//
//	t := headway.New(nil, preset.GitHub(), preset.Notion(),
//		preset.OpenAI(500, 200_000)) // your tier's requests and tokens per minute
//
// The figures are the providers' published limits at the date given in
// each constructor's source, rounded down where the provider is vague.
// Limits change, and accounts differ (plans, tiers, enterprise contracts):
// change a Preset's fields to fit yours. The presets are built from
// headway's public API only, so a preset for another API is written the
// same way.
package preset
