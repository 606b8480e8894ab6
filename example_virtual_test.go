package headway_test

import (
	"io"
	"os"
	"strings"
	"testing"
	"testing/synctest"
)

// TestExampleNew runs ExampleNew in virtual time and checks what it
// prints: its claims (no request rejected, none early) hold of the pacing,
// which a loaded machine's stalls would blur in real time.
func TestExampleNew(t *testing.T) {
	got := stdoutOf(t, func() {
		synctest.Test(t, func(*testing.T) { ExampleNew() })
	})
	want := "statuses: map[200:20]\n" +
		"took at least 375ms: true\n" +
		"server: admitted 20, rejected 0, early 0\n"
	if got != want {
		t.Errorf("ExampleNew printed\n%s\nwant\n%s", got, want)
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
