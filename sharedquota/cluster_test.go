package sharedquota

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
)

// TestCluster runs the quota on a 3-master Redis Cluster: quotas spread
// over the masters, and SCRIPT FLUSH on every master is survived.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	nodes := startCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].addr()}, ContextTimeoutEnabled: true})
	defer c.Close()
	q := NewRedis(c, WithPrefix(testPrefix(t)), WithTimeout(time.Second), WithHeartbeat(50*time.Millisecond))
	defer q.Close()
	ctx := context.Background()
	lim := headway.Every(time.Second).WithBurst(2)
	slots := map[int64]bool{}
	for i := range 20 {
		key := "token-" + strconv.Itoa(i)
		reserve(t, q, key, 1, lim)
		reserve(t, q, key, 1, lim)
		if d := reserve(t, q, key, 1, lim); !near(d, time.Second) {
			t.Fatalf("%s: third reservation waits %v", key, d)
		}
		if err := q.Pause(ctx, key, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		quota, _ := q.KeyNames(key)
		s1, _ := c.ClusterKeySlot(ctx, quota).Result()
		slots[s1/5462] = true // which third of the slots, roughly which master
	}
	if len(slots) < 2 {
		t.Errorf("all keys on one master: %v", slots)
	}
	waitFor(t, 10*time.Second, func() bool { return q.Live("token-19") == 1 })
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.ScriptFlush(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, q, "token-0", 1, lim); d < 5*time.Second {
		t.Fatalf("after SCRIPT FLUSH the pause is lost: wait %v", d)
	}
	if s := q.Stats(); s.Errors != 0 {
		t.Fatalf("stats %+v", s)
	}
}
