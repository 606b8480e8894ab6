package sharedquota

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/headway-go/headway"
)

// cutProxy forwards the connections it accepts on a loopback address to a
// Redis, until cut: then it closes every connection and refuses new ones,
// as a partition of the processes that reach Redis through it would, until
// healed.
type cutProxy struct {
	t      testing.TB
	to     string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	serves sync.WaitGroup
}

func startCutProxy(t testing.TB, to string) *cutProxy {
	p := &cutProxy{t: t, to: to}
	p.listen("127.0.0.1:0")
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.serves.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.ln != ln { // cut meanwhile
				p.mu.Unlock()
				c.Close()
				u.Close()
				return
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	})
}

// cut closes the listener and every connection.
func (p *cutProxy) cut() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.serves.Wait()
}

// heal listens again on the same address.
func (p *cutProxy) heal() { p.listen(p.addr) }

// departures has each of a and b reserve slots on key "k" under lim, one
// after another, each waiting for its slot, for d, and counts the slots
// each reserved before the end: counts that a loaded machine can only make
// smaller.
func departures(t testing.TB, d time.Duration, lim headway.Limit, a, b *Redis) (na, nb int) {
	end := time.Now().Add(d)
	sent := func(q *Redis) int {
		n := 0
		for time.Now().Before(end) {
			w, err := q.Reserve(context.Background(), "k", []headway.Limit{lim}, 1, time.Second)
			if err != nil {
				t.Error(err)
				return n
			}
			if time.Now().Add(w).Before(end) {
				n++
			}
			time.Sleep(w)
		}
		return n
	}
	var wg sync.WaitGroup
	wg.Go(func() { na = sent(a) })
	wg.Go(func() { nb = sent(b) })
	wg.Wait()
	return na, nb
}

// TestPartitionOfOneProcess: a process cut off from the Redis the other
// still reaches falls back to its share, while the other shares the whole
// limit: together they send up to 1 + 1/2 times the limit, as the package
// documents, and no more; once the partition heals, the process shares
// again.
func TestPartitionOfOneProcess(t *testing.T) {
	srv := startRedis(t)
	proxy := startCutProxy(t, srv.addr())
	opts := []Option{WithPrefix(testPrefix(t)), WithTimeout(slowTimeout), WithHeartbeat(100 * time.Millisecond), WithRetryInterval(100 * time.Millisecond)}
	a := NewRedis(newKillableClient(t, srv.addr()), opts...)
	defer a.Close()
	b := NewRedis(newKillableClient(t, proxy.addr), opts...)
	defer b.Close()
	const rate = 20
	lim := headway.PerSecond(rate)
	reserve(t, a, "k", 1, lim)
	reserve(t, b, "k", 1, lim)
	waitFor(t, 10*time.Second, func() bool { return a.Live("k") == 2 && b.Live("k") == 2 })

	proxy.cut()
	const dur = 2 * time.Second
	na, nb := departures(t, dur, lim, a, b)
	t.Logf("b cut off for %v at %d/s: a sent %d, b %d: %.1f/s together", dur, rate, na, nb, float64(na+nb)/dur.Seconds())
	if most := int(rate*dur.Seconds()/2) + 1; nb > most {
		t.Errorf("b, cut off, sent %d, over its share (%d)", nb, most)
	}
	if most := int(1.5*rate*dur.Seconds()) + 2; na+nb > most {
		t.Errorf("together they sent %d, over 1.5 times the limit (%d)", na+nb, most)
	}
	if s := b.Stats(); s.Degraded == 0 {
		t.Errorf("b's stats %+v: nothing fell back", s)
	}

	proxy.heal()
	waitFor(t, 10*time.Second, func() bool {
		before := b.Stats().Degraded
		reserve(t, b, "k", 1, lim)
		return b.Stats().Degraded == before
	})
}
