package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestMain lets the test binary be what the node re-executes as a
// container's first process and a pod's pause process, as the node's own
// binary is.
func TestMain(m *testing.M) {
	runSubcommand()
	os.Exit(m.Run())
}

// newTestManager is a node's container runtime for one test, stopped with it.
func newTestManager(t *testing.T, dir string, spec func(containerKey) containerRun, onExit func(containerKey, int)) *shellManager {
	t.Helper()
	m, err := newShellManager(filepath.Join(dir, "containers"), newBootID(), onExit)
	if err != nil {
		t.Fatal(err)
	}
	m.spec = spec
	t.Cleanup(m.closeAll)
	return m
}

// script runs a container's command as sh -c with env.
func script(cmd string, env ...string) containerRun {
	return containerRun{argv: []string{"/bin/sh", "-c", cmd}, env: env}
}

// waitForFile waits until file exists and returns what it holds.
func waitForFile(t *testing.T, file string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if raw, err := os.ReadFile(file); err == nil && strings.HasSuffix(string(raw), "\n") {
			return string(raw)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written within 20 s", file)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cgroupProcs lists the processes (as this machine numbers them) in a
// container's cgroup.
func cgroupProcs(t *testing.T, sh *shell) []int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(sh.cgroup, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(raw)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// alive reports whether process pid runs (exists and is not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

// pidNamespace is the PID namespace process pid is in.
func pidNamespace(t *testing.T, pid int) string {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func waitEnded(t *testing.T, ended <-chan int) int {
	t.Helper()
	select {
	case code := <-ended:
		return code
	case <-time.After(20 * time.Second):
		t.Fatal("the container did not end")
		return 0
	}
}

// A container's main process is PID 1 of a PID namespace of its own, whose
// /proc shows only the container, and a SIGKILL sent to it from inside is
// dropped, as the kernel does for the init of a namespace.
func TestAContainerHasAPIDNamespaceOfItsOwnWhosePID1IgnoresKill(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	ended := make(chan int, 1)
	m := newTestManager(t, dir, func(containerKey) containerRun {
		return script(`sleep 300 & kill -9 1; kill -KILL $$; echo "$$ $(ls /proc | grep -c '^[0-9]')" > "$OUT"; exec sleep 300`, "OUT="+out)
	}, func(_ containerKey, code int) { ended <- code })
	sh, err := m.get(containerKey{"ns", "p", "c"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(waitForFile(t, out))
	// sh (then sleep, same pid), the background sleep, ls, grep: nothing of this machine's.
	if len(got) != 2 || got[0] != "1" {
		t.Fatalf("the container's main process says %q, want pid 1", got)
	}
	if n, _ := strconv.Atoi(got[1]); n < 2 || n > 5 {
		t.Fatalf("the container's /proc lists %s processes, want only its own", got[1])
	}
	if pidNamespace(t, sh.cmd.Process.Pid) == pidNamespace(t, os.Getpid()) {
		t.Fatal("the container runs in the node's PID namespace")
	}
	sh.kill()
	if code := waitEnded(t, ended); code != 137 {
		t.Fatalf("a container killed by the node ended with %d, want 137", code)
	}
}

// When a container's main process exits, every process of the container is
// killed, whatever it did to stay: a job in the background, setsid, a double
// fork, a loop deaf to SIGTERM and SIGHUP in its own process group, a PID
// namespace of its own; as runc kills a container's cgroup.
func TestAContainerEndsWithItsMainProcessAndTakesEveryProcessAlong(t *testing.T) {
	dir := t.TempDir()
	ready, goOn := filepath.Join(dir, "ready"), filepath.Join(dir, "go")
	cmd := `sleep 300 &
setsid sleep 301 &
(sh -c 'sleep 302 &' &)
setsid sh -c "trap '' TERM HUP; while :; do sleep 1; done" &
unshare --pid --fork sleep 303 &
nohup sleep 304 >/dev/null 2>&1 &
sleep 0.3; echo ready > "$READY"
while [ ! -e "$GO" ]; do sleep 0.05; done
exit 3`
	ended := make(chan int, 1)
	m := newTestManager(t, dir, func(containerKey) containerRun {
		return script(cmd, "READY="+ready, "GO="+goOn)
	}, func(_ containerKey, code int) { ended <- code })
	sh, err := m.get(containerKey{"ns", "p", "debug-1"})
	if err != nil {
		t.Fatal(err)
	}
	waitForFile(t, ready)
	started := cgroupProcs(t, sh)
	// The main shell, six sleeps, the loop and its sleep, unshare.
	if len(started) < 9 {
		t.Fatalf("the container's cgroup holds %v, want every process it started", started)
	}
	if err := os.WriteFile(goOn, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := waitEnded(t, ended); code != 3 {
		t.Fatalf("exit code %d, want the main process's 3", code)
	}
	for _, pid := range started {
		if alive(pid) {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Fatalf("process %d (%q) of the ended container still runs", pid, stat)
		}
	}
	if _, err := os.Stat(sh.cgroup); err == nil {
		t.Fatalf("the ended container's cgroup %s is left", sh.cgroup)
	}
}

// A container that names a target joins the target's PID namespace (it
// sees the target's processes, and is not PID 1 there); when it ends, its
// own processes go and the target's stay. Every container of a pod that
// shares its process namespace is in the pod's, whose PID 1 is the pause
// process.
func TestATargetedContainerJoinsItsTargetAndAPodCanShareOneNamespace(t *testing.T) {
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	ended := make(chan containerKey, 4)
	m := newTestManager(t, dir, func(key containerKey) containerRun {
		switch key.Container {
		case "app":
			return containerRun{argv: []string{"/bin/sh", "-c", "exec sleep 600"}}
		case "debug":
			run := script(`setsid sleep 305 & echo "$$ $(cat /proc/1/cmdline | tr '\0' ' ')" > "$SEEN"; while [ ! -e "$SEEN.go" ]; do sleep 0.05; done`, "SEEN="+seen)
			run.target = "app"
			return run
		default: // the shared pod's containers
			run := script(`echo "$$ $(cat /proc/1/cmdline | tr '\0' ' ')" > "$SEEN.$C"; exec sleep 600`, "SEEN="+seen, "C="+key.Container)
			run.sharePod = true
			return run
		}
	}, func(key containerKey, _ int) { ended <- key })

	debug, err := m.get(containerKey{"ns", "p", "debug"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(waitForFile(t, seen))
	app := m.lookup(containerKey{"ns", "p", "app"})
	if app == nil {
		t.Fatal("the target container was not started with the container that targets it")
	}
	// The target's PID 1 is its command, or, a moment before, the node's first process of it
	// about to become that command: both end with it.
	if got[0] == "1" || !strings.HasSuffix(strings.Join(got[1:], " "), "sleep 600") {
		t.Fatalf("the targeted container sees %q, want its own pid and the target's sleep as PID 1", got)
	}
	if pidNamespace(t, debug.nsPid) != pidNamespace(t, app.cmd.Process.Pid) {
		t.Fatal("the targeted container is not in its target's PID namespace")
	}
	left := cgroupProcs(t, debug)
	if err := os.WriteFile(seen+".go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if key := <-ended; key.Container != "debug" {
		t.Fatalf("%s ended, want debug", key)
	}
	for _, pid := range left {
		if alive(pid) {
			t.Fatalf("process %d of the ended targeted container still runs", pid)
		}
	}
	if !alive(app.cmd.Process.Pid) {
		t.Fatal("the target container ended with the container that targeted it")
	}

	one, err := m.get(containerKey{"ns", "shared", "one"})
	if err != nil {
		t.Fatal(err)
	}
	two, err := m.get(containerKey{"ns", "shared", "two"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"one", "two"} {
		got := strings.Fields(waitForFile(t, seen+"."+c))
		if got[0] == "1" || !strings.HasSuffix(strings.Join(got[1:], " "), pauseCommand) {
			t.Fatalf("container %s of the shared pod sees %q, want the pause process as PID 1", c, got)
		}
	}
	if pidNamespace(t, one.nsPid) != pidNamespace(t, two.nsPid) {
		t.Fatal("the containers of a pod sharing its process namespace are in different ones")
	}
	m.killPod("ns", "shared")
	for _, sh := range []*shell{one, two} {
		<-sh.done
	}
}

// Stopping the node stops every container and every process each started,
// also those that left its session, and only those: another node's container
// keeps running.
func TestClosingTheNodeStopsEveryContainersProcesses(t *testing.T) {
	dir := t.TempDir()
	const containers = 40
	ready := filepath.Join(dir, "ready")
	run := func(key containerKey) containerRun {
		return script(`setsid sleep 300 & sleep 300 & echo x >> "$READY"; exec sleep 300`, "READY="+ready+"."+key.Pod)
	}
	shells := newTestManager(t, filepath.Join(dir, "closed"), run, nil)
	other := newTestManager(t, filepath.Join(dir, "other"), run, nil)
	kept, err := other.get(containerKey{"ns", "kept", "c"})
	if err != nil {
		t.Fatal(err)
	}
	var all []*shell
	for i := 0; i < containers; i++ {
		sh, err := shells.get(containerKey{"ns", "p", "debug-" + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sh)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, _ := os.ReadFile(ready + ".p")
		if strings.Count(string(raw), "x") >= containers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d containers started", strings.Count(string(raw), "x"), containers)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitForFile(t, ready+".kept")
	var started []int
	for _, sh := range all {
		started = append(started, cgroupProcs(t, sh)...)
	}
	keptPids := cgroupProcs(t, kept)
	shells.closeAll()
	for _, pid := range started {
		if alive(pid) {
			t.Fatalf("process %d of a stopped container still runs", pid)
		}
	}
	for _, pid := range keptPids {
		if !alive(pid) {
			t.Fatalf("process %d of the other node's container was stopped with this node", pid)
		}
	}
}

// debugImage lays out the debug image's files as scripts/controlplane.sh
// build does: the supervisor built from debug-image/supervisor, and
// debug-image/profile.sh.
func debugImage(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "image")
	bin := filepath.Join(root, "usr", "local", "bin")
	etc := filepath.Join(root, "etc", "breakglass")
	for _, d := range []string{bin, etc} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "breakglass-supervisor"), ".")
	build.Dir = filepath.Join("..", "..", "debug-image", "supervisor")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the supervisor: %v\n%s", err, out)
	}
	profile, err := os.ReadFile(filepath.Join("..", "..", "debug-image", "profile.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "profile.sh"), profile, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// The environment the node gives a debug container is the image's
// (debug-image/Dockerfile's ENV), HOME aside.
func TestTheDebugImageEnvironmentIsTheDockerfiles(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "debug-image", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "ENV ") {
			in, line = true, strings.TrimPrefix(line, "ENV ")
		} else if !in {
			continue
		}
		in = strings.HasSuffix(line, "\\")
		for _, f := range strings.Fields(strings.TrimSuffix(line, "\\")) {
			if !strings.HasPrefix(f, "HOME=") {
				env = append(env, f)
			}
		}
	}
	if strings.Join(env, " ") != strings.Join(imageEnv, " ") {
		t.Fatalf("the Dockerfile's environment is %q, the node gives %q", env, imageEnv)
	}
}

// terminal is a test's view of a container's terminal: what it printed, and
// a way to type.
type terminal struct {
	sh  *shell
	mu  sync.Mutex
	out strings.Builder
}

func attachTerminal(t *testing.T, sh *shell) *terminal {
	t.Helper()
	term := &terminal{sh: sh}
	r, w := io.Pipe()
	_, unsubscribe := sh.subscribe(w)
	t.Cleanup(unsubscribe)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return term
}

func (term *terminal) typeIn(t *testing.T, keys string) {
	t.Helper()
	if _, err := io.WriteString(term.sh.pty, keys); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until the terminal printed text.
func (term *terminal) waitFor(t *testing.T, text string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		term.mu.Lock()
		found := strings.Contains(term.out.String(), text)
		term.mu.Unlock()
		if found {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	term.mu.Lock()
	defer term.mu.Unlock()
	t.Fatalf("no %q on the terminal: %q", text, term.out.String())
}

// A person who means to stay in a debug container run as it ships (the
// image's supervisor and profile) cannot: whatever they start and whatever
// they send to what they can see, the container ends at the server's end
// (the terminal set to 1x1, also while a command holds the foreground), at
// its deadline, and when they end the shell, and nothing of it is left.
func TestADebugContainerEndsWhateverThePersonDoes(t *testing.T) {
	image := debugImage(t)
	supervisor := []string{"/usr/local/bin/breakglass-supervisor"}
	// Everything they can see is sent what would stop it, then what stays is started.
	stay := `kill -9 1; kill -STOP 1; kill -TSTP 1; kill -INT 1; kill -HUP 1; kill -QUIT 1; ` +
		`for p in $(ls /proc | grep '^[0-9]'); do [ "$p" = "$$" ] || kill -9 "$p" 2>/dev/null; done; ` +
		`sleep 600 & setsid nohup sleep 601 >/dev/null 2>&1 & (sh -c 'sleep 602 &' &); ` +
		`setsid sh -c "trap '' TERM HUP INT; while :; do sleep 1; done" & ` +
		`echo "stayed $(cat /proc/1/cmdline | tr '\0' ' ')"` + "\r"
	cases := []struct {
		name     string
		deadline time.Duration
		end      func(t *testing.T, term *terminal)
		code     int
	}{
		{"the server's end", time.Hour, func(t *testing.T, term *terminal) {
			if err := pty.Setsize(term.sh.pty, &pty.Winsize{Rows: 1, Cols: 1}); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"the server's end with a command in the foreground", time.Hour, func(t *testing.T, term *terminal) {
			term.typeIn(t, "sh -c 'echo fg-$((6*7)); exec sleep 603'\r")
			term.waitFor(t, "fg-42")
			if err := pty.Setsize(term.sh.pty, &pty.Winsize{Rows: 1, Cols: 1}); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"the deadline", 5 * time.Second, func(*testing.T, *terminal) {}, 124},
		{"the shell's exit", time.Hour, func(t *testing.T, term *terminal) {
			term.typeIn(t, "exit 7\r")
		}, 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ended := make(chan int, 1)
			deadline := strconv.FormatInt(time.Now().Add(c.deadline).Unix(), 10)
			m := newTestManager(t, dir, func(containerKey) containerRun {
				return containerRun{argv: supervisor, env: []string{"BREAKGLASS_DEADLINE=" + deadline}, image: true}
			}, func(_ containerKey, code int) { ended <- code })
			m.image = image
			sh, err := m.get(containerKey{"ns", "p", "debug-1"})
			if err != nil {
				t.Fatal(err)
			}
			term := attachTerminal(t, sh)
			// The image's profile marks the prompt (OSC 133).
			term.waitFor(t, "\x1b]133;B\x07")
			term.typeIn(t, stay)
			term.waitFor(t, "stayed /usr/local/bin/breakglass-supervisor")
			started := cgroupProcs(t, sh)
			if len(started) < 7 {
				t.Fatalf("the container holds %v, want what the person started", started)
			}
			c.end(t, term)
			if code := waitEnded(t, ended); code != c.code {
				t.Fatalf("the container ended with %d, want %d", code, c.code)
			}
			for _, pid := range started {
				if alive(pid) {
					t.Fatalf("process %d of the ended debug container still runs", pid)
				}
			}
		})
	}
}
