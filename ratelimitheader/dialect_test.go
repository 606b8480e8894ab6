package ratelimitheader

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A built-in dialect called on its own, as a Dialect of the caller's that
// wraps it would call it, reads what it reads within a parse. Before, the
// header families it looks for were found only by the parse, and a dialect
// called alone read nothing.
func TestABuiltinDialectReadsOnItsOwn(t *testing.T) {
	in := &Input{Status: 200, Now: caseNow, Header: http.Header{
		"Ratelimit":        {`"default";r=7;t=30`},
		"Ratelimit-Policy": {`"default";q=100;w=60`},
	}}
	var alone Signal
	DefaultDialects()[0].Parse(in, &alone) // ietf
	assert.Equal(t, Signal{Remaining: 7, HasRemaining: true, Reset: 30 * time.Second, Limit: 100, Period: time.Minute}, alone)
	assert.Equal(t, Parse(in), alone, "as within a parse")
}
