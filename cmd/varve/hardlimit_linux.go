package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// The places a capped soak may find memory cgroups: the unified (v2)
// hierarchy at the root or beside v1 (hybrid), and the v1 memory
// hierarchy.
var (
	unifiedRoots = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
	memoryCgroup = "/sys/fs/cgroup/memory"
)

// Ways to cap the child, for --cap.
const (
	capAuto         = "auto"
	capCgroupV2     = "cgroup-v2"
	capCgroupV1     = "cgroup-v1"
	capAddressSpace = "address-space"
)

// cage is a hard memory limit a capped soak's child runs under.
type cage interface {
	// describe names the cage in reports.
	describe() string
	// prepare sets up cmd before it starts.
	prepare(cmd *exec.Cmd)
	// enter moves the started child into the cage.
	enter(pid int) error
	// usage reports the peak usage (0 when unknown), the kernel's
	// out-of-memory kills in the cage, and a line of the cage's figures.
	usage() (peak uint64, oomKills int, line string)
	// remove tears the cage down after the child ended.
	remove()
}

// newCage builds the cage how asks for (capAuto: the first that works of
// cgroup v2, cgroup v1, an address-space limit); tried says why the ones
// before it could not be used.
func newCage(how string, limit int64) (c cage, tried []string, err error) {
	name := "varve-soak-" + strconv.Itoa(os.Getpid())
	try := func(kind string, mk func() (cage, error)) bool {
		if how != capAuto && how != kind {
			return false
		}
		c, err = mk()
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", kind, err))
			return false
		}
		return true
	}
	if try(capCgroupV2, func() (cage, error) { return newCgroupV2(unifiedRoots, name, limit) }) ||
		try(capCgroupV1, func() (cage, error) { return newCgroupV1(memoryCgroup, name, limit) }) ||
		try(capAddressSpace, func() (cage, error) { return addressSpace{limit: limit}, nil }) {
		return c, tried, nil
	}
	return nil, tried, fmt.Errorf("--hard-limit: no way to cap the soak (%s)", strings.Join(tried, "; "))
}

// cgroupV2 is a leaf cgroup of the unified hierarchy with memory.max set
// and swap off (Documentation/admin-guide/cgroup-v2.rst: "Memory Interface
// Files"). The memory controller must be enabled for children in the
// parent's cgroup.subtree_control; the parent is the hierarchy's root
// (exempt from the no-internal-process rule), and when its subtree_control
// lacks memory the cage enables it with "+memory".
type cgroupV2 struct {
	dir   string
	limit int64
}

func newCgroupV2(roots []string, name string, limit int64) (cage, error) {
	var root string
	for _, r := range roots {
		b, err := os.ReadFile(filepath.Join(r, "cgroup.controllers"))
		if err != nil {
			continue
		}
		if hasWord(string(b), "memory") {
			root = r
			break
		}
		return nil, fmt.Errorf("the unified hierarchy at %s has no memory controller (controllers: %q)", r, strings.TrimSpace(string(b)))
	}
	if root == "" {
		return nil, fmt.Errorf("no unified hierarchy (cgroup.controllers) under %s", strings.Join(roots, " or "))
	}
	sub := filepath.Join(root, "cgroup.subtree_control")
	b, err := os.ReadFile(sub)
	if err != nil {
		return nil, err
	}
	if !hasWord(string(b), "memory") {
		if err := os.WriteFile(sub, []byte("+memory"), 0o644); err != nil {
			return nil, fmt.Errorf("enable the memory controller in %s: %w", sub, err)
		}
	}
	c := &cgroupV2{dir: filepath.Join(root, name), limit: limit}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create a cgroup under %s: %w", root, err)
	}
	if err := c.write("memory.max", strconv.FormatInt(limit, 10)); err != nil {
		c.remove()
		return nil, fmt.Errorf("set memory.max: %w", err)
	}
	// Without swap accounting the file is missing, and the cap is on RAM.
	_ = c.write("memory.swap.max", "0")
	return c, nil
}

func (c *cgroupV2) write(name, v string) error {
	return os.WriteFile(filepath.Join(c.dir, name), []byte(v), 0o644)
}

func (c *cgroupV2) describe() string { return "cgroup v2 memory.max " + mibs(uint64(c.limit)) }

func (c *cgroupV2) prepare(*exec.Cmd) {}

func (c *cgroupV2) enter(pid int) error { return c.write("cgroup.procs", strconv.Itoa(pid)) }

func (c *cgroupV2) usage() (uint64, int, string) {
	peak, _ := strconv.ParseUint(readTrim(filepath.Join(c.dir, "memory.peak")), 10, 64) // Linux 5.19 and later
	events := keyed(readTrim(filepath.Join(c.dir, "memory.events")))
	kills, _ := strconv.Atoi(events["oom_kill"])
	line := fmt.Sprintf("environment: capped (%s), peak usage %s, memory.events max %s, oom %s, oom_kill %s",
		c.describe(), mibs(peak), orZero(events["max"]), orZero(events["oom"]), orZero(events["oom_kill"]))
	return peak, kills, line
}

func (c *cgroupV2) remove() { _ = os.Remove(c.dir) }

// cgroupV1 is a group of the v1 memory hierarchy with limit_in_bytes set
// and swap off.
type cgroupV1 struct {
	dir   string
	limit int64
}

func newCgroupV1(hierarchy, name string, limit int64) (cage, error) {
	c := &cgroupV1{dir: filepath.Join(hierarchy, name), limit: limit}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create a memory cgroup under %s: %w", hierarchy, err)
	}
	if err := c.write("memory.limit_in_bytes", strconv.FormatInt(limit, 10)); err != nil {
		c.remove()
		return nil, fmt.Errorf("set the cgroup's memory limit: %w", err)
	}
	// Without swap the limit is hard: over it the kernel reclaims, then
	// kills.
	_ = c.write("memory.memsw.limit_in_bytes", strconv.FormatInt(limit, 10))
	_ = c.write("memory.swappiness", "0")
	return c, nil
}

func (c *cgroupV1) write(name, v string) error {
	return os.WriteFile(filepath.Join(c.dir, name), []byte(v), 0o644)
}

func (c *cgroupV1) describe() string { return "cgroup v1 memory limit " + mibs(uint64(c.limit)) }

func (c *cgroupV1) prepare(*exec.Cmd) {}

func (c *cgroupV1) enter(pid int) error { return c.write("cgroup.procs", strconv.Itoa(pid)) }

func (c *cgroupV1) usage() (uint64, int, string) {
	peak, _ := strconv.ParseUint(readTrim(filepath.Join(c.dir, "memory.max_usage_in_bytes")), 10, 64)
	kills := orZero(keyed(readTrim(filepath.Join(c.dir, "memory.oom_control")))["oom_kill"])
	n, _ := strconv.Atoi(kills)
	line := fmt.Sprintf("environment: capped (cgroup v1 memory.limit_in_bytes %s), peak usage %s, failcnt %s, oom kills %s",
		mibs(uint64(c.limit)), mibs(peak), readTrim(filepath.Join(c.dir, "memory.failcnt")), kills)
	return peak, n, line
}

func (c *cgroupV1) remove() { _ = os.Remove(c.dir) }

// addressSpace caps the child's address space (RLIMIT_AS) where no cgroup
// can be created. Go reserves address space it never touches at start, so
// the child sets the limit itself, to its address space after start-up
// plus the cap ([applyAddressLimit]): above it mmap fails and Go ends
// with "fatal error: runtime: out of memory" rather than a kill.
type addressSpace struct{ limit int64 }

// addressLimitEnv carries the cap to the child.
const addressLimitEnv = "VARVE_SOAK_RLIMIT_AS"

func (a addressSpace) describe() string {
	return "address space limit (RLIMIT_AS): start-up mappings + " + mibs(uint64(a.limit))
}

// prepare passes the cap, and gives the child one glibc malloc arena
// unless the environment names a number: a cgo build's threads would each
// reserve an arena of 64 MiB on their first malloc, which counts against
// RLIMIT_AS as much as Go's heap does. With them a discovery capped at 128
// MiB died after 0.03-2.3 s (2 of 32 runs before its second sample, one at
// 12 MB of heap); with one arena after 0.6-3.8 s (60 runs, 12 samples at least).
func (a addressSpace) prepare(cmd *exec.Cmd) {
	cmd.Env = append(cmd.Env, addressLimitEnv+"="+strconv.FormatInt(a.limit, 10))
	if !slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, mallocArenaMax+"=") }) {
		cmd.Env = append(cmd.Env, mallocArenaMax+"=1")
	}
}

// mallocArenaMax bounds glibc's malloc arenas (mallopt M_ARENA_MAX).
const mallocArenaMax = "MALLOC_ARENA_MAX"

func (addressSpace) enter(int) error { return nil }

func (a addressSpace) usage() (uint64, int, string) {
	return 0, 0, "environment: capped (" + a.describe() + ")"
}

func (addressSpace) remove() {}

// applyAddressLimit is the child's half of the address-space cap: when its
// parent asked for one it sets RLIMIT_AS to its current address space
// plus the cap, and returns the limit set (0 when none was asked for).
func applyAddressLimit() (uint64, error) {
	v := os.Getenv(addressLimitEnv)
	if v == "" {
		return 0, nil
	}
	extra, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", addressLimitEnv, v, err)
	}
	size, err := vmSize()
	if err != nil {
		return 0, err
	}
	lim := &syscall.Rlimit{Cur: size + extra, Max: size + extra}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, lim); err != nil {
		return 0, fmt.Errorf("setrlimit RLIMIT_AS: %w", err)
	}
	return size + extra, nil
}

// vmSize reads the process's address space size from /proc/self/status.
func vmSize() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmSize in /proc/self/status")
}

// capped runs args (a soak without --hard-limit) as a child process of
// this binary under a cage of limit bytes (how: --cap), with the child's
// stdout and stderr passed through and its samples recorded to record. It
// prints the cage's figures and returns how the child ended. Without a
// cage it can build it returns an error naming why, and runs nothing.
func capped(args []string, how string, limit int64, record string, stdout, stderr io.Writer) (env string, end ending, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", end, err
	}
	c, tried, err := newCage(how, limit)
	if err != nil {
		return "", end, err
	}
	env = "capped (" + c.describe() + ")"
	defer c.remove()
	for _, t := range tried {
		fmt.Fprintf(stderr, "varve: --hard-limit: not with %s\n", t)
	}
	cmd := exec.Command(self, args...)
	fatal := &fatalLine{}
	cmd.Stdout, cmd.Stderr = stdout, io.MultiWriter(stderr, fatal)
	cmd.Env = append(os.Environ(), soakEnvironment+"="+env, soakRecord+"="+record)
	c.prepare(cmd)
	if err := cmd.Start(); err != nil {
		return env, end, err
	}
	if err := c.enter(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return env, end, fmt.Errorf("move the soak into its cage: %w", err)
	}
	waitErr := cmd.Wait()
	peak, kills, line := c.usage()
	fmt.Fprintln(stdout, line)
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
		end = ending{how: "survived, exit code 0"}
	case errors.As(waitErr, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled() && ws.Signal() == syscall.SIGKILL && kills > 0:
			end = ending{died: true, code: exitFailed, how: fmt.Sprintf("killed by the kernel's out-of-memory killer (SIGKILL, oom_kill %d)", kills)}
		case ws.Signaled():
			end = ending{died: true, code: exitFailed, how: "killed by " + ws.Signal().String()}
		case fatal.get() != "":
			end = ending{died: true, code: exitFailed, how: fmt.Sprintf("allocation failure: the Go runtime ended the process with exit code %d (%s)", ee.ExitCode(), fatal.get())}
		default:
			end = ending{code: ee.ExitCode(), how: fmt.Sprintf("exit code %d", ee.ExitCode())}
		}
	default:
		return env, end, waitErr
	}
	if peak > 0 && end.died {
		end.how += " at peak usage " + mibs(peak)
	}
	fmt.Fprintln(stdout, "capped soak:", end.how)
	return env, end, nil
}

// fatalLine keeps the first "fatal error:" line written to it (a Go
// runtime crash).
type fatalLine struct {
	buf  []byte
	line string
}

func (f *fatalLine) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			break
		}
		if l := string(f.buf[:i]); f.line == "" && strings.HasPrefix(l, "fatal error: ") {
			f.line = l
		}
		f.buf = f.buf[i+1:]
	}
	if len(f.buf) > 4096 {
		f.buf = f.buf[len(f.buf)-4096:]
	}
	return len(p), nil
}

func (f *fatalLine) get() string { return f.line }

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// keyed parses "key value" lines (memory.events, memory.oom_control).
func keyed(s string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), " "); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

func mibs(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
