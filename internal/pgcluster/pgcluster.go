// Package pgcluster starts a private PostgreSQL cluster for tests that need
// settings the machine's shared server does not have, such as
// wal_level=logical for change data capture.
//
// A test package has one cluster: TestMain runs the tests through [Main],
// and the first test that asks for the URL ([Shared.URL]) starts it. Without
// CI=true a cluster that could not start skips the tests with a loud
// message, with CI=true it fails them. The cluster lives in a temporary
// directory, listens on a free loopback port only (no Unix socket), and is
// stopped and removed when the tests end.
//
// The PostgreSQL binaries are taken from VARVE_PG_BINDIR or the newest
// /usr/lib/postgresql/*/bin. initdb refuses to run as root, so under root the
// server runs as the "postgres" user (set as the child's credentials).
// VARVE_PG_LOGICAL_URL names an already running server to use instead.
//
// [Cluster.StartStandby] adds a hot standby: a copy of the cluster taken
// with pg_basebackup that streams the primary's WAL and answers read-only
// queries, on a port of its own. For fault tests (internal/pgchaos),
// [Synchronous] and [Asynchronous] configure the replication, and a node
// can be killed ([Cluster.Kill]), frozen ([Cluster.Pause]), promoted
// ([Cluster.Promote]) and rejoined as a standby ([Cluster.Rejoin]);
// [MultiHostURL] names all nodes for clients that follow the primary.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/varve-go/varve/internal/testenv"
)

// Config says how to start the cluster.
type Config struct {
	// Settings are passed to the server as -c name=value, after the
	// defaults (listen address, port, no Unix socket, fsync off).
	Settings map[string]string
}

// Logical is a Config for logical replication: wal_level=logical and room
// for a few slots and WAL senders.
func Logical() Config {
	return Config{Settings: map[string]string{
		"wal_level":             "logical",
		"max_replication_slots": "16",
		"max_wal_senders":       "16",
		"wal_sender_timeout":    "60s",
	}}
}

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	cfg    Config
	bin    string
	dir    string
	data   string
	port   int
	cred   *syscall.Credential
	uid    int
	cmd    *exec.Cmd
	exited chan struct{}
}

// newDir makes the cluster's temporary directory, owned by the server's
// user.
func (c *Cluster) newDir() error {
	var err error
	c.dir, err = os.MkdirTemp("", "varve-pgcluster-")
	if err != nil {
		return fmt.Errorf("pgcluster: temp dir: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(c.dir, c.uid, -1); err != nil {
			c.remove()
			return fmt.Errorf("pgcluster: chown %s: %w", c.dir, err)
		}
	}
	c.data = filepath.Join(c.dir, "data")
	return nil
}

// URL is the connection string of the cluster's "postgres" database.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// DataDir is the cluster's data directory (owned by the server's user).
func (c *Cluster) DataDir() string { return c.data }

// Port is the loopback TCP port the server listens on.
func (c *Cluster) Port() int { return c.port }

// Start initialises a cluster in a new temporary directory and starts it.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, bin: bin, uid: -1}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgcluster: running as root, and initdb refuses root: need the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.uid = uid
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if err := c.newDir(); err != nil {
		return nil, err
	}
	initdb := c.command(ctx, "initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		c.remove()
		return nil, fmt.Errorf("pgcluster: initdb: %w\n%s", err, out)
	}
	if err := c.startServer(ctx, 0); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

// StartStandby copies the running cluster with pg_basebackup (streaming
// the WAL of the copy) into a new temporary directory and starts the copy
// as a hot standby on a free loopback port: it replays the primary's WAL
// as it comes (primary_conninfo, written by pg_basebackup -R) and answers
// read-only queries. The standby has the primary's settings. Stop it
// before the primary.
func (c *Cluster) StartStandby(ctx context.Context) (*Cluster, error) {
	if c.cmd == nil {
		return nil, errors.New("pgcluster: start standby: the primary is not running")
	}
	sb := &Cluster{cfg: c.cfg, bin: c.bin, uid: c.uid, cred: c.cred}
	if err := sb.newDir(); err != nil {
		return nil, err
	}
	backup := sb.command(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", "postgres",
		"-D", sb.data, "-X", "stream", "-R", "--checkpoint=fast", "--no-sync")
	if out, err := backup.CombinedOutput(); err != nil {
		sb.remove()
		return nil, fmt.Errorf("pgcluster: pg_basebackup: %w\n%s", err, out)
	}
	if err := sb.startServer(ctx, 0); err != nil {
		sb.remove()
		return nil, err
	}
	return sb, nil
}

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	return cmd
}

// startServer starts the postmaster on port (a free one when 0) and waits
// until it accepts connections.
func (c *Cluster) startServer(ctx context.Context, port int) error {
	var lastErr error
	for try := 0; try < 5; try++ {
		p := port
		if p == 0 {
			var err error
			if p, err = freePort(); err != nil {
				return err
			}
		}
		args := []string{"-D", c.data,
			"-c", "listen_addresses=127.0.0.1",
			"-c", "port=" + strconv.Itoa(p),
			"-c", "unix_socket_directories=",
			"-c", "fsync=off",
			"-c", "full_page_writes=off",
		}
		keys := make([]string, 0, len(c.cfg.Settings))
		for k := range c.cfg.Settings {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			args = append(args, "-c", k+"="+c.cfg.Settings[k])
		}
		// Not bound to ctx: the server outlives the start call and is
		// stopped by Stop. Pdeathsig ends it if the test binary dies.
		cmd := exec.Command(filepath.Join(c.bin, "postgres"), args...)
		cmd.Dir = c.dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
		logFile, err := os.Create(c.logPath())
		if err != nil {
			return fmt.Errorf("pgcluster: server log: %w", err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		err = cmd.Start()
		logFile.Close()
		if err != nil {
			return fmt.Errorf("pgcluster: start postgres: %w", err)
		}
		c.cmd, c.port, c.exited = cmd, p, make(chan struct{})
		go func(exited chan struct{}) {
			_ = cmd.Wait()
			close(exited)
		}(c.exited)
		lastErr = c.waitReady(ctx)
		if lastErr == nil {
			return nil
		}
		c.kill()
		if port != 0 || ctx.Err() != nil {
			break
		}
	}
	out, _ := os.ReadFile(c.logPath())
	return fmt.Errorf("pgcluster: server did not become ready: %w\n%s", lastErr, out)
}

func (c *Cluster) logPath() string { return filepath.Join(c.dir, "postgres.log") }

func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		select {
		case <-c.exited:
			return errors.New("postgres exited")
		default:
		}
		conn, err := pgconn.Connect(ctx, c.URL())
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-c.exited:
			return errors.New("postgres exited")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Restart stops the server with the given shutdown mode ("fast" or
// "immediate", a crash) and starts it again on the same port.
func (c *Cluster) Restart(ctx context.Context, mode string) error {
	sig := syscall.SIGINT
	if mode == "immediate" {
		sig = syscall.SIGQUIT
	}
	if err := c.stopServer(sig); err != nil {
		return err
	}
	return c.startServer(ctx, c.port)
}

func (c *Cluster) stopServer(sig syscall.Signal) error {
	if c.cmd == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.exited:
	case <-time.After(60 * time.Second):
		c.kill()
		return errors.New("pgcluster: server did not stop within 60s; killed")
	}
	c.cmd = nil
	return nil
}

func (c *Cluster) kill() {
	if c.cmd == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.exited
	c.cmd = nil
}

func (c *Cluster) remove() { _ = os.RemoveAll(c.dir) }

// Stop shuts the server down (fast mode) and removes its directory.
func (c *Cluster) Stop() error {
	err := c.stopServer(syscall.SIGINT)
	c.remove()
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func binDir() (string, error) {
	if d := os.Getenv("VARVE_PG_BINDIR"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("pgcluster: no PostgreSQL binaries (set VARVE_PG_BINDIR or install postgresql)")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Shared is a test package's cluster: started by the first test that asks
// for its URL ([Shared.URL]), so that a run of tests that need none, a fuzz
// worker or a child process of a test starts no server, and stopped by
// [Main] after the tests.
type Shared struct {
	// Cluster is the running cluster, nil before the first URL call and
	// when VARVE_PG_LOGICAL_URL names an outside server.
	Cluster *Cluster
	cfg     Config
	main    bool
	once    sync.Once
	url     string
	err     error
}

func (s *Shared) start() {
	if !s.main {
		s.err = errors.New("pgcluster.Main was not called from TestMain")
		return
	}
	if u := os.Getenv("VARVE_PG_LOGICAL_URL"); u != "" {
		s.url = u
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, s.cfg)
	if err != nil {
		s.err = err
		return
	}
	s.Cluster, s.url = c, c.URL()
}

// URL returns the cluster's connection string, starting the cluster on the
// first call, or skips the test (fails it with CI=true) when the cluster
// could not start.
func (s *Shared) URL(t testing.TB) string {
	t.Helper()
	s.once.Do(s.start)
	if s.err != nil {
		Unavailable(t, "private PostgreSQL (wal_level=logical)", s.err, "Install PostgreSQL's server binaries or set VARVE_PG_LOGICAL_URL.")
	}
	return s.url
}

// Unavailable skips the test with a loud message saying that what could
// not start, and why, or fails it with CI=true.
func Unavailable(t testing.TB, what string, err error, hint string) {
	t.Helper()
	msg := fmt.Sprintf("\n"+
		"#############################################################\n"+
		"## %s is not available:\n"+
		"## %v\n"+
		"## %s\n"+
		"#############################################################", what, err, hint)
	if testenv.CI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Main runs the tests with s configured by cfg, stops the cluster if a
// test started it, and returns the exit code for os.Exit. check, when not
// nil, runs after the tests (a goroutine leak check, say) and its error
// fails the run.
func Main(m *testing.M, s *Shared, cfg Config, check func() error) int {
	s.cfg, s.main = cfg, true
	code := m.Run()
	if s.Cluster != nil {
		if err := s.Cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	if check != nil && code == 0 {
		if err := check(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}
