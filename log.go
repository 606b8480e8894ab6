package headway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
)

// WithLogger makes the Transport log what it decides to l: pauses, breaker
// state changes and outages (a key's host going down and coming back) at
// Info, and at Debug every decision on every
// attempt (admitted after a wait, rejected and why, throttled, retried).
// Nothing is logged per request unless l is enabled for Debug. A nil l,
// the default, logs nothing and costs nothing.
//
// Records never carry a key as it is, since keys may hold credentials
// (KeyByHeader), nor a full URL: a key is logged as a short hash (the
// first 12 hex digits of its SHA-256, the same in every process), a
// request as its method, host and path, without query or user
// information.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.obs.log = l })
}

// keyID returns a short, stable name for key that does not reveal it: the
// first 12 hex digits of its SHA-256.
func keyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

func (o *observer) debug(ctx context.Context) bool {
	return o.log != nil && o.log.Enabled(ctx, slog.LevelDebug)
}

// reqAttrs are the attributes that name a request in a record: its key's
// hash, method, host and path. Never the query, which may carry tokens.
func reqAttrs(req *http.Request, key string) []slog.Attr {
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("key", keyID(key)), slog.String("method", req.Method))
	if req.URL != nil {
		attrs = append(attrs, slog.String("host", req.URL.Host), slog.String("path", req.URL.Path))
	}
	return attrs
}

// errAttr logs err without the URL a *url.Error would add.
func errAttr(err error) slog.Attr {
	var ue *url.Error
	for errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	return slog.String("err", err.Error())
}
