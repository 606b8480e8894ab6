package ratelimitheader

import (
	"testing"
	"time"
)

// Azure's resource providers list their throttling policies, each
// <provider>/<policy>;<count>, the window at the end of the name.
func TestPolicyCounts(t *testing.T) {
	const m = time.Minute
	const compute = "X-Ms-Ratelimit-Remaining-Resource"
	runCases(t, nil, []signalCase{
		{name: "one line, two policies: the fewest left", status: 200,
			headers: [][2]string{dateNow, {compute, "Microsoft.Compute/HighCostGet3Min;107,Microsoft.Compute/HighCostGet30Min;587"}},
			want:    Signal{Remaining: 107, HasRemaining: true, Period: 3 * m}},
		{name: "a line per policy, in any order", status: 200,
			headers: [][2]string{{compute, "Microsoft.Compute/GetVMScaleSet30Min;12"}, {compute, "Microsoft.Compute/GetVMScaleSet3Min;197"}},
			want:    Signal{Remaining: 12, HasRemaining: true, Period: 30 * m}},
		{name: "a space after the semicolon, a policy without a window", status: 200,
			headers: [][2]string{{compute, "Microsoft.Compute/HighCostGet; 159"}, {compute, "Microsoft.Compute/VmssQueuedVMOperations;4720"}},
			want:    Signal{Remaining: 159, HasRemaining: true}},
		{name: "spent, with the 429's Retry-After", status: 429,
			headers: [][2]string{dateNow, {"Retry-After", "17"}, {compute, "Microsoft.Compute/DeleteVMScaleSet3Min;0,Microsoft.Compute/DeleteVMScaleSet30Min;587"}},
			want:    Signal{Throttled: true, Wait: 17 * time.Second, HasWait: true, RetryAfter: true, HasRemaining: true, Period: 3 * m}},
		{name: "spent without a Retry-After: no wait is named", status: 429,
			headers: [][2]string{{compute, "Microsoft.Compute/HighCostGet3Min;0"}},
			want:    Signal{Throttled: true, HasRemaining: true, Period: 3 * m}},
		{name: "next to the subscription's count", status: 200,
			headers: [][2]string{{"x-ms-ratelimit-remaining-subscription-reads", "11999"}, {"x-ms-ratelimit-remaining-resource", "Microsoft.Compute/GetVMScaleSet3Min;197,Microsoft.Compute/GetVMScaleSet30Min;1297"}},
			want:    Signal{Remaining: 197, HasRemaining: true, Period: 3 * m}},
		{name: "malformed counts ignored", status: 200,
			headers: [][2]string{{compute, "Microsoft.Compute/A3Min;-1, Microsoft.Compute/B3Min;NaN, Microsoft.Compute/C3Min;1e3, ;5, 7;8, Microsoft.Compute/D30Min;99999999999999999999999"}},
			want:    Signal{Remaining: 1<<63 - 1, HasRemaining: true, Period: 30 * m}},
		{name: "an early draft's policy is not a named count", status: 200,
			headers: [][2]string{{"X-Ratelimit-Remaining", "5;w=60"}},
			want:    Signal{}},
		{name: "a plain count next to a named one", status: 200,
			headers: [][2]string{{"X-Ratelimit-Remaining", "40, Burst10Sec;3"}},
			want:    Signal{Remaining: 3, HasRemaining: true, Period: 10 * time.Second}},
	})
	for name, want := range map[string]time.Duration{
		"Microsoft.Compute/HighCostGet3Min": 3 * m, "Microsoft.Compute/PutVM30Min": 30 * m, "Burst10Sec": 10 * time.Second,
		"Daily1Day": 24 * time.Hour, "VmssQueuedVMOperations": 0, "HighCostGet2": 0, "Gen2d": 0, "3Min/": 0, "": 0, "/": 0,
		"Min": 0, "99999999999Min": 0, "1001Hour": 0, "Get0Min": 0, "Foo1000Year": 0, "Foo300Year": 0, "Foo13Month": 0,
		"Foo12Month": 360 * 24 * time.Hour,
	} {
		if got := policyWindow(name); got != want {
			t.Errorf("policyWindow(%q) = %v, want %v", name, got, want)
		}
	}
}
