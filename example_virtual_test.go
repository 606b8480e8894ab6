package headway_test

import (
	"io"
	"os"
	"strings"
	"testing"
	"testing/synctest"
)

// The examples whose claims hold of timing run in virtual time, where a
// loaded machine's stalls cannot blur them; these tests check what they
// print.

func TestExampleNew(t *testing.T) {
	checkExample(t, ExampleNew, "statuses: map[200:20]\n"+
		"took at least 375ms: true\n"+
		"server: admitted 20, rejected 0, early 0\n")
}

func TestExampleBreakerSettings_hold(t *testing.T) {
	checkExample(t, ExampleBreakerSettings_hold, "urgent request: true\n"+
		"ok 20, failed 0, sent during the outage: at most 10: true\n")
}

// checkExample runs example in a synctest bubble and fails t unless it
// prints want.
func checkExample(t *testing.T, example func(), want string) {
	t.Helper()
	got := stdoutOf(t, func() {
		synctest.Test(t, func(*testing.T) { example() })
	})
	if got != want {
		t.Errorf("the example printed\n%s\nwant\n%s", got, want)
	}
}

// stdoutOf returns what f writes to os.Stdout.
func stdoutOf(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := make(chan string)
	go func() {
		var b strings.Builder
		_, _ = io.Copy(&b, r)
		out <- b.String()
	}()
	stdout := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = stdout }()
	f()
	os.Stdout = stdout
	w.Close()
	return <-out
}
