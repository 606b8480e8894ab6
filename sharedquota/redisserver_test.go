package sharedquota

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The tests run against a real Redis: the one at REDIS_ADDR if set, else a
// redis-server they start on a free loopback port and kill at cleanup.
// Without either they skip, except under CI=true, where they fail.

// redisServer is a redis-server started by a test.
type redisServer struct {
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// needRedisServer skips (or, under CI, fails) a test that needs to start
// redis-server when there is none on PATH.
func needRedisServer(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "sharedquota: these tests need Redis: set REDIS_ADDR or put redis-server on PATH (apt-get install redis-server)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// redisAddr returns the address of a Redis for the test: REDIS_ADDR, or a
// redis-server of its own.
func redisAddr(t testing.TB) string {
	t.Helper()
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	return startRedis(t).addr()
}

// startRedis starts a redis-server on a free loopback port, waits until it
// answers PING, and kills it at cleanup.
func startRedis(t testing.TB, extra ...string) *redisServer {
	t.Helper()
	needRedisServer(t)
	s := &redisServer{dir: t.TempDir(), args: extra}
	var err error
	for range 5 {
		s.port = freePort(t)
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(s.kill)
	return s
}

func (s *redisServer) start() error {
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
	}, s.args...)
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	if err := waitPing(s.addr(), 5*time.Second); err != nil {
		s.kill()
		return err
	}
	return nil
}

// kill kills the server by its PID and waits for it to exit.
func (s *redisServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// restart starts the server again on the same port, empty.
func (s *redisServer) restart(t testing.TB) {
	t.Helper()
	s.kill()
	if err := s.start(); err != nil {
		t.Fatalf("restart redis-server: %v", err)
	}
}

func waitPing(addr string, within time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis at %s does not answer PING: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// newClient returns a client of addr that honours context deadlines, closed
// at cleanup.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// newKillableClient returns a client of a Redis the test will kill,
// closed at cleanup. It tries each call once and dials once: a call to the
// killed Redis fails at once (connection refused), where go-redis's
// default would dial again and again until the quota's timeout. The quotas
// of such tests can then wait slowTimeout for a live Redis (a loaded
// machine makes it slow, not gone) and still fall back as soon as it is
// killed.
func newKillableClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	return c
}

// testPrefix is a key prefix of the test's own, so that tests sharing a
// REDIS_ADDR do not meet.
func testPrefix(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "headway-test-" + hex.EncodeToString(b[:])
}

// startCluster starts a Redis Cluster of three masters, each with
// replicas replicas, on free loopback ports, waits until it is ok (and the
// replicas in sync), and kills its nodes at cleanup. It returns the nodes.
func startCluster(t testing.TB, replicas int) []*redisServer {
	t.Helper()
	needRedisServer(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("sharedquota: the cluster tests need redis-cli on PATH")
	}
	var nodes []*redisServer
	var addrs []string
	for i := range 3 * (1 + replicas) {
		dir := t.TempDir()
		n := startRedis(t, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", i)),
			"--cluster-node-timeout", "1000")
		nodes = append(nodes, n)
		addrs = append(addrs, n.addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			repl, _ := c.Info(context.Background(), "replication").Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				(strings.Contains(repl, "role:master") || strings.Contains(repl, "master_link_status:up")) {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("cluster not ok at %s: %v %s %s", a, err, info, repl)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return nodes
}
