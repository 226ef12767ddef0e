package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Synchronous is a Config for a primary whose commits wait until a
// standby has flushed their WAL (synchronous_standby_names='*',
// synchronous_commit=on), with wal_log_hints on so that an old primary can
// be rewound. A standby started from such a primary has the same settings,
// so that it keeps the promise once promoted: its commits then wait for the
// old primary to rejoin as its standby.
func Synchronous() Config {
	return Config{Settings: replication(map[string]string{
		"synchronous_standby_names": "*",
		"synchronous_commit":        "on",
	})}
}

// Asynchronous is a Config that acknowledges a commit before its WAL is
// written, let alone sent to a standby (synchronous_commit=off, no
// synchronous standby, the WAL writer waking every 10 s): a primary killed
// and replaced by its standby loses the commits of its last seconds. It is
// the setting that shows a checker catching lost acknowledged writes.
func Asynchronous() Config {
	return Config{Settings: replication(map[string]string{
		"synchronous_standby_names": "",
		"synchronous_commit":        "off",
		"wal_writer_delay":          "10000ms",
	})}
}

func replication(s map[string]string) map[string]string {
	for k, v := range map[string]string{
		"wal_level":                    "replica",
		"wal_log_hints":                "on",
		"max_wal_senders":              "8",
		"hot_standby":                  "on",
		"wal_sender_timeout":           "5s",
		"wal_receiver_status_interval": "1s",
		"wal_retrieve_retry_interval":  "200ms",
	} {
		s[k] = v
	}
	return s
}

// MultiHostURL is a connection string that names every cluster and asks
// for the one that accepts writes (target_session_attrs=read-write): a
// client that reconnects after a fail-over finds the promoted standby.
func MultiHostURL(db string, nodes ...*Cluster) string {
	hosts := make([]string, len(nodes))
	for i, n := range nodes {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(n.port)
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		strings.Join(hosts, ","), db)
}

// Running reports whether the server process is running (paused counts).
func (c *Cluster) Running() bool { return c.cmd != nil }

// Kill ends the server at once: SIGKILL to the postmaster and every
// process it started, a crash that leaves its data directory as it was
// (fsync is off, so what the kernel holds survives: a process crash, not a
// power cut). Start it again with Restart or Rejoin.
func (c *Cluster) Kill() {
	if c.cmd == nil {
		return
	}
	// Stopped first, the postmaster forks no child after the list is read.
	_ = syscall.Kill(c.cmd.Process.Pid, syscall.SIGSTOP)
	kids := children(c.cmd.Process.Pid)
	for _, pid := range kids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	c.kill()
	// A restart refuses to start while a dead server's process still holds
	// its shared memory: wait until each is gone (or a zombie).
	for _, pid := range kids {
		for try := 0; try < 1000 && alive(pid); try++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || !bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z"))
}

// children lists the processes whose parent is pid. PostgreSQL's children
// each start a session of their own (setsid), so the postmaster's process
// group holds only the postmaster.
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// Pause freezes the server: SIGSTOP to the postmaster and every process it
// started. Its
// clients' connections stay open and their statements hang until Resume.
func (c *Cluster) Pause() error { return c.signalGroup(syscall.SIGSTOP) }

// Resume wakes a server frozen by Pause (SIGCONT).
func (c *Cluster) Resume() error { return c.signalGroup(syscall.SIGCONT) }

func (c *Cluster) signalGroup(sig syscall.Signal) error {
	if c.cmd == nil {
		return errors.New("pgcluster: the server is not running")
	}
	pm := c.cmd.Process.Pid
	if sig == syscall.SIGSTOP {
		if err := syscall.Kill(pm, sig); err != nil {
			return fmt.Errorf("pgcluster: %v: %w", sig, err)
		}
	}
	for _, pid := range children(pm) {
		_ = syscall.Kill(pid, sig)
	}
	if sig != syscall.SIGSTOP {
		if err := syscall.Kill(pm, sig); err != nil {
			return fmt.Errorf("pgcluster: %v: %w", sig, err)
		}
	}
	return nil
}

// Promote makes a standby a primary (pg_promote, waiting for the end of
// recovery).
func (c *Cluster) Promote(ctx context.Context) error {
	// pg_promote's wait can be cancelled by a conflict with recovery
	// (SQLSTATE 40001) after it has signalled the promotion: the server is
	// asked again until it says it is out of recovery.
	for try := 0; ; try++ {
		err := c.promote(ctx)
		var pg *pgconn.PgError
		if err == nil || !errors.As(err, &pg) || pg.Code != "40001" || try == 10 {
			return err
		}
		if in, rerr := c.InRecovery(ctx); rerr == nil && !in {
			return nil
		}
	}
}

func (c *Cluster) promote(ctx context.Context) error {
	conn, err := pgconn.Connect(ctx, c.URL())
	if err != nil {
		return fmt.Errorf("pgcluster: promote: %w", err)
	}
	defer conn.Close(context.Background())
	res := conn.ExecParams(ctx, "SELECT pg_promote(true, 60)", nil, nil, nil, nil).Read()
	if res.Err != nil {
		return fmt.Errorf("pgcluster: promote: %w", res.Err)
	}
	if len(res.Rows) != 1 || string(res.Rows[0][0]) != "t" {
		return errors.New("pgcluster: promote: pg_promote did not finish within 60s")
	}
	return nil
}

// InRecovery reports whether the server is a standby.
func (c *Cluster) InRecovery(ctx context.Context) (bool, error) {
	conn, err := pgconn.Connect(ctx, c.URL())
	if err != nil {
		return false, fmt.Errorf("pgcluster: %w", err)
	}
	defer conn.Close(context.Background())
	res := conn.ExecParams(ctx, "SELECT pg_is_in_recovery()", nil, nil, nil, nil).Read()
	if res.Err != nil {
		return false, fmt.Errorf("pgcluster: %w", res.Err)
	}
	return string(res.Rows[0][0]) == "t", nil
}

// Rejoin makes c, stopped (killed, say) and no longer the primary, a
// standby of primary on its old port: its data directory is replaced by a
// fresh pg_basebackup of primary (a copy that follows primary's timeline,
// whatever c had written that primary never got is dropped) and started.
func (c *Cluster) Rejoin(ctx context.Context, primary *Cluster) error {
	if c.cmd != nil {
		return errors.New("pgcluster: rejoin: the server is still running; Kill it first")
	}
	if err := os.RemoveAll(c.data); err != nil {
		return fmt.Errorf("pgcluster: rejoin: %w", err)
	}
	var out []byte
	var err error
	for try := 0; try < 3; try++ {
		_ = os.RemoveAll(c.data)
		backup := c.command(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
			"-D", c.data, "-X", "stream", "-R", "--checkpoint=fast", "--no-sync")
		if out, err = backup.CombinedOutput(); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("pgcluster: rejoin: pg_basebackup: %w\n%s", err, out)
	}
	return c.startServer(ctx, c.port)
}
