// Package natscluster runs NATS JetStream servers as real processes on
// loopback, for tests that kill, freeze, restart and wipe them (issue
// #39).
//
// A [Cluster] of three nodes is a JetStream cluster whose routes name
// each other; a cluster of one is a single JetStream server. Each node
// keeps its ports and its store directory across restarts, so that a
// restarted node rejoins as the same member. A node's process is either a
// nats-server executable ([Config.Binary]: the 2.9 server of Debian, say)
// or, when Binary is empty, the calling test binary started again as a
// server: it serves with the nats-server module of go.mod, the current
// server, when its TestMain calls [Serve] first.
//
// Faults are signals to a node's process: [Node.Kill] (SIGKILL),
// [Node.Pause] (SIGSTOP) and [Node.Resume] (SIGCONT); [Node.Start] brings
// a killed node back and [Node.Wipe] removes its store. Every process
// dies with the test process that started it (PR_SET_PDEATHSIG).
package natscluster

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const childEnv = "VARVE_NATSCLUSTER_SERVE"

// Serve makes this process a nats-server when a Cluster started it as
// one, and then never returns; otherwise it returns at once. Call it
// first in the TestMain of a package whose tests start clusters with an
// empty Config.Binary.
func Serve() {
	raw, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		server.PrintAndDie("natscluster: arguments: " + err.Error())
	}
	fs := flag.NewFlagSet("nats-server", flag.ExitOnError)
	opts, err := server.ConfigureOptions(fs, args, server.PrintServerAndExit, fs.Usage, server.PrintTLSHelpAndDie)
	if err != nil {
		server.PrintAndDie("natscluster: " + err.Error())
	}
	s, err := server.NewServer(opts)
	if err != nil {
		server.PrintAndDie("natscluster: " + err.Error())
	}
	s.ConfigureLogger()
	if err := server.Run(s); err != nil {
		server.PrintAndDie(err.Error())
	}
	s.WaitForShutdown()
	os.Exit(0)
}

// Config is a cluster's shape.
type Config struct {
	// Binary is a nats-server executable; empty: this test binary, which
	// must call Serve in its TestMain.
	Binary string
	// Nodes is 3 (a cluster) or 1 (a single server); default 3.
	Nodes int
	// Dir holds each node's store and log; a test's t.TempDir().
	Dir string
}

// Node is one server process.
type Node struct {
	Name        string
	Port        int // clients
	ClusterPort int // routes; 0 for a single server
	dir         string
	exe         string
	self        bool // exe is this test binary, serving through Serve
	args        []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// Cluster is a set of nodes.
type Cluster struct {
	Nodes []*Node
}

// Start starts the nodes and waits until JetStream answers (a cluster has
// elected its meta leader). Ports are picked free just before; if one is
// taken meanwhile, the nodes are stopped and started on other ports, three
// times at most.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Nodes != 1 && cfg.Nodes != 3 {
		return nil, fmt.Errorf("natscluster: %d nodes, want 1 or 3", cfg.Nodes)
	}
	exe, self := cfg.Binary, cfg.Binary == ""
	if self {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("natscluster: this executable: %w", err)
		}
	}
	var err error
	for try := range 3 {
		var c *Cluster
		if c, err = build(cfg, exe, self, filepath.Join(cfg.Dir, "try"+strconv.Itoa(try))); err != nil {
			return nil, err
		}
		if err = c.start(ctx); err == nil {
			return c, nil
		}
		c.Stop()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func build(cfg Config, exe string, self bool, dir string) (*Cluster, error) {
	ports, err := freePorts(2 * cfg.Nodes)
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	var routes []string
	for i := range cfg.Nodes {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[cfg.Nodes+i]))
	}
	for i := range cfg.Nodes {
		n := &Node{Name: "n" + strconv.Itoa(i+1), Port: ports[i], dir: filepath.Join(dir, "n"+strconv.Itoa(i+1)), exe: exe, self: self}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return nil, err
		}
		n.args = []string{"-a", "127.0.0.1", "-p", strconv.Itoa(n.Port), "-n", n.Name, "-js", "-sd", filepath.Join(n.dir, "store")}
		if cfg.Nodes > 1 {
			n.ClusterPort = ports[cfg.Nodes+i]
			n.args = append(n.args, "--cluster_name", "varve-chaos", "--cluster", routes[i], "--routes", strings.Join(routes, ","))
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("natscluster: a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (c *Cluster) start(ctx context.Context) error {
	for _, n := range c.Nodes {
		if err := n.spawn(); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := n.waitListening(ctx); err != nil {
			return err
		}
	}
	return c.WaitJetStream(ctx)
}

// URLs are the nodes' client URLs, comma separated, as nats.go takes them.
func (c *Cluster) URLs() string {
	var u []string
	for _, n := range c.Nodes {
		u = append(u, n.URL())
	}
	return strings.Join(u, ",")
}

// Node returns the node named name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitJetStream waits until a running node answers a JetStream request
// (a cluster has a meta leader).
func (c *Cluster) WaitJetStream(ctx context.Context) error {
	return retry(ctx, func(ctx context.Context) error {
		nc, js, err := c.connect()
		if err != nil {
			return err
		}
		defer nc.Close()
		_, err = js.AccountInfo(ctx)
		return err
	})
}

// StreamInfo is what the cluster says of a stream: its leader and
// whether every replica is current.
type StreamInfo struct {
	Leader    string
	Followers []string
	Current   bool // every replica online and current
	Messages  uint64
}

// Stream reports on the stream named name.
func (c *Cluster) Stream(ctx context.Context, name string) (StreamInfo, error) {
	nc, js, err := c.connect()
	if err != nil {
		return StreamInfo{}, err
	}
	defer nc.Close()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return StreamInfo{}, err
	}
	info := s.CachedInfo()
	si := StreamInfo{Current: true, Messages: info.State.Msgs}
	if ci := info.Cluster; ci != nil {
		si.Leader = ci.Leader
		for _, r := range ci.Replicas {
			si.Followers = append(si.Followers, r.Name)
			if !r.Current || r.Offline {
				si.Current = false
			}
		}
	}
	if si.Leader == "" && len(c.Nodes) > 1 {
		si.Current = false
	}
	return si, nil
}

// WaitCurrent waits until the stream has a leader and every replica is
// current: the cluster is whole again after a fault.
func (c *Cluster) WaitCurrent(ctx context.Context, stream string) error {
	return retry(ctx, func(ctx context.Context) error {
		si, err := c.Stream(ctx, stream)
		if err != nil {
			return err
		}
		if !si.Current || len(si.Followers) != len(c.Nodes)-1 {
			return fmt.Errorf("stream %s: leader %q, replicas %v not all current", stream, si.Leader, si.Followers)
		}
		return nil
	})
}

// connect connects to the running nodes, once, without reconnecting.
func (c *Cluster) connect() (*natsgo.Conn, jetstream.JetStream, error) {
	var urls []string
	for _, n := range c.Nodes {
		if n.Running() {
			urls = append(urls, n.URL())
		}
	}
	if len(urls) == 0 {
		return nil, nil, errors.New("natscluster: no node running")
	}
	nc, err := natsgo.Connect(strings.Join(urls, ","), natsgo.NoReconnect(), natsgo.Timeout(2*time.Second))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// URL is the node's client URL.
func (n *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.Port) }

// Running reports whether the node's process is alive (paused or not).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

func (n *Node) spawn() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	log, err := os.OpenFile(filepath.Join(n.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(n.exe, n.args...)
	if n.self {
		raw, _ := json.Marshal(n.args)
		cmd = exec.Command(n.exe)
		cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("natscluster: start %s: %w", n.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	n.cmd, n.exited, n.paused = cmd, exited, false
	return nil
}

// Start starts a node that is down (killed) on its ports and store, and
// waits until it takes connections.
func (n *Node) Start(ctx context.Context) error {
	if n.Running() {
		return fmt.Errorf("natscluster: %s is running", n.Name)
	}
	// The port was the node's; a connection of another process may hold it
	// for a moment (TIME_WAIT does not, the server sets SO_REUSEADDR).
	err := retry(ctx, func(context.Context) error {
		if err := n.spawn(); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := n.waitListening(wctx); err != nil {
			n.Kill()
			return err
		}
		return nil
	})
	return err
}

func (n *Node) waitListening(ctx context.Context) error {
	return retry(ctx, func(ctx context.Context) error {
		if !n.Running() {
			return permanent{fmt.Errorf("natscluster: %s exited (log %s)", n.Name, filepath.Join(n.dir, "server.log"))}
		}
		nc, err := natsgo.Connect(n.URL(), natsgo.NoReconnect(), natsgo.Timeout(time.Second))
		if err != nil {
			return err
		}
		nc.Close()
		return nil
	})
}

// Kill sends SIGKILL and waits until the process is gone.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.paused = false
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Pause freezes the node's process (SIGSTOP); Resume thaws it (SIGCONT).
func (n *Node) Pause() error { return n.signal(syscall.SIGSTOP, true) }

// Resume thaws a paused node; on a node that is not paused it does nothing.
func (n *Node) Resume() error {
	n.mu.Lock()
	p := n.paused
	n.mu.Unlock()
	if !p {
		return nil
	}
	return n.signal(syscall.SIGCONT, false)
}

func (n *Node) signal(sig syscall.Signal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("natscluster: %s was never started", n.Name)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("natscluster: %v to %s: %w", sig, n.Name, err)
	}
	n.paused = paused
	return nil
}

// Wipe removes the store of a node that is down: what a lost disk does.
func (n *Node) Wipe() error {
	if n.Running() {
		return fmt.Errorf("natscluster: wipe %s while it runs", n.Name)
	}
	return os.RemoveAll(filepath.Join(n.dir, "store"))
}

type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// retry calls f every 50 ms, with 2 s for each try, until it succeeds,
// fails with a permanent error, or ctx ends; the error is then f's last.
func retry(ctx context.Context, f func(context.Context) error) error {
	for {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := f(tctx)
		cancel()
		var p permanent
		if err == nil || errors.As(err, &p) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
