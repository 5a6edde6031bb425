package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"
)

// containerKey names one container of one pod on the simulated node.
type containerKey struct {
	Namespace, Pod, Container string
}

func (k containerKey) String() string { return k.Namespace + "/" + k.Pod + "/" + k.Container }

// shell is the "process" of one simulated container: a real /bin/sh whose
// stdin/stdout is a PTY. Output is fanned out to every attached client and
// kept in a small ring buffer (served as the container log).
type shell struct {
	key    containerKey
	cmd    *exec.Cmd
	pty    *os.File
	exited chan struct{} // closed when the main process exited and the rest of the container was stopped
	done   chan struct{} // closed when the shell exited and its output is drained

	mu       sync.Mutex
	subs     map[int]*subscriber
	nextSub  int
	log      []byte // last logLimit bytes of output
	exitCode int
	// closing: the node stops every container at once (closeAll), so reap
	// leaves the stopping to it rather than look through /proc again.
	closing bool
}

type subscriber struct {
	w      io.Writer
	failed chan struct{} // closed on the first write error
	once   sync.Once
}

const logLimit = 64 << 10

// shellManager owns every shell of the node, one per container, created on
// first use (attach, exec into the container's directory, logs).
type shellManager struct {
	root   string // per-container working directories live under it
	onExit func(key containerKey, exitCode int)
	// spec gives a container's own command and environment (nil, or an empty
	// command: an interactive /bin/sh).
	spec func(key containerKey) (argv []string, env []string)

	mu     sync.Mutex
	shells map[containerKey]*shell
	closed bool
}

func newShellManager(root string, onExit func(containerKey, int)) *shellManager {
	return &shellManager{root: root, onExit: onExit, shells: map[containerKey]*shell{}}
}

func (m *shellManager) containerDir(key containerKey) (string, error) {
	dir := filepath.Join(m.root, key.Namespace, key.Pod, key.Container)
	return dir, os.MkdirAll(dir, 0o755)
}

// markerEnv names, in every process of a simulated container, the container it
// belongs to, so that the processes a container started are found and stopped
// with it even when they left its session (setsid).
const markerEnv = "BREAKGLASS_SIM_CONTAINER"

func (m *shellManager) env(dir string, key containerKey) []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + dir,
		"TERM=xterm",
		"PS1=$ ",
		"LANG=C.UTF-8",
		markerEnv + "=" + key.String(),
	}
}

// get returns the running shell of a container, starting it if needed.
func (m *shellManager) get(key containerKey) (*shell, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("node is shutting down")
	}
	if sh, ok := m.shells[key]; ok {
		return sh, nil
	}
	dir, err := m.containerDir(key)
	if err != nil {
		return nil, err
	}
	argv, env := []string{"/bin/sh"}, m.env(dir, key)
	if m.spec != nil {
		own, ownEnv := m.spec(key)
		if len(own) > 0 {
			argv = own
		}
		env = append(env, ownEnv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	// Setsid+Setctty are set by pty.Start; Pdeathsig keeps shells from
	// outliving this process if it is killed hard.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Pdeathsig: syscall.SIGKILL}
	f, err := pty.StartWithAttrs(cmd, &pty.Winsize{Rows: 24, Cols: 80}, cmd.SysProcAttr)
	if err != nil {
		return nil, fmt.Errorf("start shell for %s: %w", key, err)
	}
	sh := &shell{key: key, cmd: cmd, pty: f, exited: make(chan struct{}), done: make(chan struct{}), subs: map[int]*subscriber{}}
	m.shells[key] = sh
	klog.V(2).InfoS("started container shell", "container", key.String(), "pid", cmd.Process.Pid)
	go sh.reap()
	go sh.pump()
	go func() {
		<-sh.done
		m.mu.Lock()
		if m.shells[key] == sh {
			delete(m.shells, key)
		}
		m.mu.Unlock()
		if m.onExit != nil {
			m.onExit(key, sh.exitCode)
		}
	}()
	return sh, nil
}

// running reports whether a container's shell exists.
func (m *shellManager) lookup(key containerKey) *shell {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shells[key]
}

// killPod ends every shell of a pod (the pod is being deleted).
func (m *shellManager) killPod(namespace, pod string) {
	m.mu.Lock()
	var victims []*shell
	for k, sh := range m.shells {
		if k.Namespace == namespace && k.Pod == pod {
			victims = append(victims, sh)
		}
	}
	m.mu.Unlock()
	for _, sh := range victims {
		sh.kill()
	}
}

// closeAll kills every shell and refuses new ones. The containers are
// stopped together, with one look through /proc a round: one look per
// container took minutes at a few thousand containers (each look reads every
// process's stat and environment), longer than the test harness waits before
// it kills this process, which left the containers' processes running.
func (m *shellManager) closeAll() {
	m.mu.Lock()
	m.closed = true
	containers := map[int]containerKey{}
	for _, sh := range m.shells {
		sh.mu.Lock()
		sh.closing = true
		sh.mu.Unlock()
		if sh.cmd.Process != nil {
			containers[sh.cmd.Process.Pid] = sh.key
		}
	}
	m.mu.Unlock()
	stopContainers(containers)
}

// kill stops the container: its main process and everything it started.
func (sh *shell) kill() {
	if sh.cmd.Process != nil {
		stopContainer(sh.cmd.Process.Pid, sh.key)
	}
}

// reap waits for the container's main process; once it is gone, the rest of
// the container goes too, as a runtime stops every process of a container
// whose main process exited (its cgroup): a job left in the background does
// not outlive the container here either.
func (sh *shell) reap() {
	err := sh.cmd.Wait()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
		if code < 0 {
			code = 137
		}
	}
	sh.mu.Lock()
	sh.exitCode = code
	closing := sh.closing
	sh.mu.Unlock()
	if !closing {
		stopContainer(sh.cmd.Process.Pid, sh.key)
	}
	close(sh.exited)
}

// stopContainer kills every process of the container whose main process is
// (or was) sid: those in its session, and those carrying its marker.
func stopContainer(sid int, key containerKey) {
	stopContainers(map[int]containerKey{sid: key})
}

// stopContainers kills every process of the given containers (main process
// id to container): those in a container's session, and those carrying a
// container's marker.
func stopContainers(containers map[int]containerKey) {
	if len(containers) == 0 {
		return
	}
	markers := make(map[string]bool, len(containers))
	for _, key := range containers {
		markers[key.String()] = true
	}
	for round := 0; round < 50; round++ {
		victims := containerProcs(containers, markers)
		if len(victims) == 0 {
			return
		}
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	klog.InfoS("processes of stopped containers kept running", "containers", len(containers))
}

// containerProcs lists the live (not zombie) processes in one of the sessions
// of containers, or whose environment marks them as one of markers'.
func containerProcs(containers map[int]containerKey, markers map[string]bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	prefix := []byte(markerEnv + "=")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 4 || fields[0] == "Z" {
			continue
		}
		if s, err := strconv.Atoi(fields[3]); err == nil {
			if _, ok := containers[s]; ok {
				out = append(out, pid)
				continue
			}
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, v := range bytes.Split(environ, []byte{0}) {
			if bytes.HasPrefix(v, prefix) && markers[string(v[len(prefix):])] {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

func (sh *shell) pump() {
	buf := make([]byte, 32<<10)
	for {
		n, err := sh.pty.Read(buf)
		if n > 0 {
			sh.broadcast(buf[:n])
		}
		if err != nil {
			break
		}
	}
	// Reading fails with EIO once the last process holding the slave side is
	// gone, which reap sees to once the main process exited.
	<-sh.exited
	_ = sh.pty.Close()
	sh.mu.Lock()
	code := sh.exitCode
	sh.mu.Unlock()
	klog.V(2).InfoS("container shell exited", "container", sh.key.String(), "exitCode", code)
	close(sh.done)
}

func (sh *shell) broadcast(p []byte) {
	sh.mu.Lock()
	sh.log = append(sh.log, p...)
	if len(sh.log) > logLimit {
		sh.log = append([]byte(nil), sh.log[len(sh.log)-logLimit:]...)
	}
	subs := make([]*subscriber, 0, len(sh.subs))
	for _, s := range sh.subs {
		subs = append(subs, s)
	}
	sh.mu.Unlock()
	for _, s := range subs {
		if _, err := s.w.Write(p); err != nil {
			s.once.Do(func() { close(s.failed) })
		}
	}
}

func (sh *shell) subscribe(w io.Writer) (*subscriber, func()) {
	s := &subscriber{w: w, failed: make(chan struct{})}
	sh.mu.Lock()
	id := sh.nextSub
	sh.nextSub++
	sh.subs[id] = s
	sh.mu.Unlock()
	return s, func() {
		sh.mu.Lock()
		delete(sh.subs, id)
		sh.mu.Unlock()
	}
}

func (sh *shell) logs() []byte {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return append([]byte(nil), sh.log...)
}

// attach connects a client to the container's shell until the client goes
// away (its stdin ends, a write to it fails, the request ends) or the shell
// exits.
func (m *shellManager) attach(ctx context.Context, key containerKey, in io.Reader, out, errOut io.WriteCloser, resize <-chan remotecommand.TerminalSize) error {
	sh, err := m.get(key)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if resize != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case size, ok := <-resize:
					if !ok {
						return
					}
					if size.Width == 0 || size.Height == 0 {
						continue
					}
					if err := pty.Setsize(sh.pty, &pty.Winsize{Rows: size.Height, Cols: size.Width}); err != nil {
						klog.V(2).InfoS("resize failed", "container", key.String(), "err", err)
					}
				}
			}
		}()
	}
	var failed <-chan struct{}
	if out != nil {
		sub, unsubscribe := sh.subscribe(out)
		defer unsubscribe()
		failed = sub.failed
	}
	stdinDone := make(chan struct{})
	if in != nil {
		go func() {
			defer close(stdinDone)
			_, _ = io.Copy(sh.pty, in)
		}()
	}
	var stdinEnded <-chan struct{}
	if in != nil {
		stdinEnded = stdinDone
	}
	select {
	case <-ctx.Done():
	case <-sh.done:
	case <-failed:
	case <-stdinEnded:
	}
	return nil
}

// exec runs a command in the container's directory, in a PTY of its own when
// tty is set, and reports a non-zero exit status as utilexec.ExitError.
func (m *shellManager) exec(ctx context.Context, key containerKey, argv []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	if len(argv) == 0 {
		return errors.New("no command given")
	}
	dir, err := m.containerDir(key)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = m.env(dir, key)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	if tty {
		f, err := pty.StartWithAttrs(cmd, &pty.Winsize{Rows: 24, Cols: 80}, &syscall.SysProcAttr{Setsid: true, Setctty: true, Pdeathsig: syscall.SIGKILL})
		if err != nil {
			return err
		}
		defer f.Close()
		if resize != nil {
			go func() {
				for size := range resize {
					if size.Width > 0 && size.Height > 0 {
						_ = pty.Setsize(f, &pty.Winsize{Rows: size.Height, Cols: size.Width})
					}
				}
			}()
		}
		if in != nil {
			go func() { _, _ = io.Copy(f, in) }()
		}
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			if out != nil {
				_, _ = io.Copy(out, f)
			} else {
				_, _ = io.Copy(io.Discard, f)
			}
		}()
		err = cmd.Wait()
		<-copied
		return exitError(err)
	}

	var stdin io.WriteCloser
	if in != nil {
		if stdin, err = cmd.StdinPipe(); err != nil {
			return err
		}
	}
	if out != nil {
		cmd.Stdout = out
	}
	if errOut != nil {
		cmd.Stderr = errOut
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if stdin != nil {
		go func() {
			_, _ = io.Copy(stdin, in)
			_ = stdin.Close()
		}()
	}
	return exitError(cmd.Wait())
}

func exitError(err error) error {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return utilexec.CodeExitError{Err: err, Code: exitErr.ExitCode()}
	}
	return err
}
