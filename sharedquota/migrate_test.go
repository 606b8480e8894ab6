package sharedquota

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/redis/go-redis/v9"
)

// TestClusterSlotMigrates: the slot of a quota moves to another master
// during a run (MOVED, then NOSCRIPT on the new master): the quota follows
// it without falling back, and its schedule moves with it.
func TestClusterSlotMigrates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	nodes := startCluster(t, 0)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].addr()}, ContextTimeoutEnabled: true})
	defer c.Close()
	q := newQuota(t, c, WithHeartbeat(50*time.Millisecond))
	ctx := context.Background()
	lim := headway.Every(time.Second)
	for i := range 3 {
		if d := reserve(t, q, "k", 1, lim); !near(d, time.Duration(i)*time.Second) {
			t.Fatalf("reservation %d waits %v", i, d)
		}
	}
	quota, _ := q.KeyNames("k")
	slot, err := c.ClusterKeySlot(ctx, quota).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The slot's master and another, by their node IDs.
	clients := map[string]*redis.Client{}
	ids := map[string]string{}
	var from, to string
	for _, n := range nodes {
		nc := redis.NewClient(&redis.Options{Addr: n.addr()})
		defer nc.Close()
		id, err := nc.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		clients[id], ids[id] = nc, n.addr()
		keys, err := nc.ClusterCountKeysInSlot(ctx, int(slot)).Result()
		if err == nil && keys > 0 {
			from = id
		}
	}
	for id := range clients {
		if id != from {
			to = id
			break
		}
	}
	if from == "" || to == "" {
		t.Fatal("cannot find the slot's master")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(clients[to].Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", from).Err())
	must(clients[from].Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", to).Err())
	keys, err := clients[from].ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
	must(err)
	if len(keys) == 0 {
		t.Fatal("the quota's hash is not in its slot")
	}
	host, port, _ := strings.Cut(ids[to], ":")
	for _, k := range keys {
		must(clients[from].Do(ctx, "MIGRATE", host, port, k, 0, 5000).Err())
	}
	for id := range clients {
		must(clients[id].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", to).Err())
	}
	// The client still routes the slot to its old master: MOVED, then
	// NOSCRIPT on the new one.
	if d := reserve(t, q, "k", 1, lim); !near(d, 3*time.Second) {
		t.Fatalf("after the migration the schedule is lost: wait %v, want about 3s", d)
	}
	if err := q.Pause(ctx, "k", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := reserve(t, q, "k", 1, lim); d < 9*time.Second {
		t.Fatalf("the pause did not hold after the migration: wait %v", d)
	}
	if n, err := clients[to].Exists(ctx, quota).Result(); err != nil || n != 1 {
		t.Fatalf("the quota's hash is not on its new master: %v, %v", n, err)
	}
	if s := q.Stats(); s.Degraded != 0 || s.Errors != 0 {
		t.Fatalf("stats %+v", s)
	}
}
