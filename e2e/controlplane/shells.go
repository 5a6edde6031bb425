package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

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
	cgroup string // every process of this run of the container
	// nsPid is a process of this machine in the container's PID namespace
	// (the one a container that targets it joins).
	nsPid  int
	exited chan struct{} // closed when the main process exited and the rest of the container was stopped
	done   chan struct{} // closed when the shell exited and its output is drained

	mu       sync.Mutex
	subs     map[int]*subscriber
	nextSub  int
	log      []byte // last logLimit bytes of output
	exitCode int
	// closing: the node stops every container at once (closeAll), so reap
	// leaves the stopping to it.
	closing bool
}

type subscriber struct {
	w      io.Writer
	failed chan struct{} // closed on the first write error
	once   sync.Once
}

const logLimit = 64 << 10

// shellManager owns every shell of the node, one per container, created on
// first use (attach, exec into the container's directory, logs), with a
// runtime's process rules (runtime.go).
type shellManager struct {
	root   string // per-container working directories live under it
	onExit func(key containerKey, exitCode int)
	// spec says how a container runs (nil, or an empty command: an
	// interactive /bin/sh in a PID namespace of its own).
	spec func(key containerKey) containerRun
	// image is the debug image's files (supervisor, profile), shown in the
	// containers whose run asks for them; empty when the node has none.
	image string
	self  string // this binary, re-executed as a container's first process
	cg    *cgroups

	mu     sync.Mutex
	shells map[containerKey]*shell
	pauses map[podKey]*pauseProc
	closed bool
}

// containerRun is how the node runs one container.
type containerRun struct {
	argv []string // the container's command and arguments
	env  []string // its environment's plain values
	// target is the container whose PID namespace it joins (an ephemeral
	// container's targetContainerName).
	target string
	// sharePod: the pod has one PID namespace (shareProcessNamespace).
	sharePod bool
	// image: a debug container, which runs the debug image's files.
	image bool
}

// podKey names a pod on the node.
type podKey struct{ Namespace, Pod string }

// pauseProc is a pod's pause process, PID 1 of the pod's PID namespace.
type pauseProc struct {
	cmd    *exec.Cmd
	cgroup string
}

// newShellManager makes the node's container runtime. It fails, saying why,
// when this machine cannot keep a runtime's process rules.
func newShellManager(root, bootID string, onExit func(containerKey, int)) (*shellManager, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cg, err := newCgroups(bootID)
	if err != nil {
		return nil, err
	}
	if err := checkRuntime(cg); err != nil {
		cg.close()
		return nil, err
	}
	return &shellManager{
		root: root, onExit: onExit, self: self, cg: cg,
		shells: map[containerKey]*shell{}, pauses: map[podKey]*pauseProc{},
	}, nil
}

func (m *shellManager) containerDir(key containerKey) (string, error) {
	dir := filepath.Join(m.root, key.Namespace, key.Pod, key.Container)
	return dir, os.MkdirAll(dir, 0o755)
}

func (m *shellManager) env(dir string) []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + dir,
		"TERM=xterm",
		"PS1=$ ",
		"LANG=C.UTF-8",
	}
}

// imageEnv is the debug image's own environment (debug-image/Dockerfile,
// ENV), which a runtime puts before the container's: HOME stays the
// container's directory here, as /home/debug is the image's.
var imageEnv = []string{
	"ENV=/etc/breakglass/profile.sh",
	"TERM=xterm-256color",
}

// get returns the running shell of a container, starting it if needed.
func (m *shellManager) get(key containerKey) (*shell, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.getLocked(key, 0)
}

// getLocked is get with m.mu held; depth guards against a target chain that
// loops.
func (m *shellManager) getLocked(key containerKey, depth int) (*shell, error) {
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
	run := containerRun{argv: []string{"/bin/sh"}}
	if m.spec != nil {
		run = m.spec(key)
		if len(run.argv) == 0 {
			run.argv = []string{"/bin/sh"}
		}
	}
	env := m.env(dir)
	initArgs := []string{"--proc", "--dir", dir}
	if run.image {
		if m.image == "" {
			return nil, fmt.Errorf("start %s: the node has no debug image files (build them with scripts/controlplane.sh build, or give --debug-image-dir)", key)
		}
		env = append(env, imageEnv...)
		initArgs = append(initArgs, "--image", m.image)
	}
	env = append(env, run.env...)
	join := 0
	switch {
	case run.target != "" && run.target != key.Container && depth < 2:
		target, err := m.getLocked(containerKey{key.Namespace, key.Pod, run.target}, depth+1)
		if err != nil {
			return nil, fmt.Errorf("start %s: its target container: %w", key, err)
		}
		join = target.nsPid
	case run.target != "":
		return nil, fmt.Errorf("start %s: target container %q cannot be its own or loop", key, run.target)
	case run.sharePod:
		p, err := m.podPause(podKey{key.Namespace, key.Pod})
		if err != nil {
			return nil, err
		}
		join = p.cmd.Process.Pid
	}
	cgroup, cgfd, err := m.cg.open(key.String())
	if err != nil {
		return nil, err
	}
	defer syscall.Close(cgfd)
	cmd := containerCommand(m.self, join, append(append(initArgs, "--"), run.argv...))
	cmd.Dir = dir
	cmd.Env = env
	attrs := containerAttrs(join, cgfd)
	f, err := pty.StartWithAttrs(cmd, &pty.Winsize{Rows: 24, Cols: 80}, attrs)
	if err != nil {
		killCgroup(cgroup)
		return nil, fmt.Errorf("start shell for %s: %w", key, err)
	}
	nsPid := join
	if join == 0 {
		nsPid = cmd.Process.Pid
	}
	sh := &shell{key: key, cmd: cmd, pty: f, cgroup: cgroup, nsPid: nsPid, exited: make(chan struct{}), done: make(chan struct{}), subs: map[int]*subscriber{}}
	m.shells[key] = sh
	klog.V(2).InfoS("started container shell", "container", key.String(), "pid", cmd.Process.Pid, "joined", join)
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

// podPause returns the pause process of a pod that shares one PID
// namespace, starting it if needed. Called with m.mu held.
func (m *shellManager) podPause(pod podKey) (*pauseProc, error) {
	if p, ok := m.pauses[pod]; ok {
		return p, nil
	}
	cgroup, cgfd, err := m.cg.open(pod.Namespace + "_" + pod.Pod + "_pause")
	if err != nil {
		return nil, err
	}
	defer syscall.Close(cgfd)
	cmd := exec.Command(m.self, pauseCommand)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setsid: true, Cloneflags: syscall.CLONE_NEWPID,
		UseCgroupFD: true, CgroupFD: cgfd, Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		killCgroup(cgroup)
		return nil, fmt.Errorf("start the pause process of %s/%s: %w", pod.Namespace, pod.Pod, err)
	}
	go func() { _ = cmd.Wait() }()
	p := &pauseProc{cmd: cmd, cgroup: cgroup}
	m.pauses[pod] = p
	return p, nil
}

// running reports whether a container's shell exists.
func (m *shellManager) lookup(key containerKey) *shell {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shells[key]
}

// killPod ends every shell of a pod (the pod is being deleted), and its
// pause process.
func (m *shellManager) killPod(namespace, pod string) {
	m.mu.Lock()
	var victims []*shell
	for k, sh := range m.shells {
		if k.Namespace == namespace && k.Pod == pod {
			victims = append(victims, sh)
		}
	}
	p := m.pauses[podKey{namespace, pod}]
	delete(m.pauses, podKey{namespace, pod})
	m.mu.Unlock()
	for _, sh := range victims {
		sh.kill()
	}
	if p != nil {
		killCgroup(p.cgroup)
	}
}

// closeAll kills every container and refuses new ones: one write kills every
// process of every container the node ran (its cgroup and those below).
func (m *shellManager) closeAll() {
	m.mu.Lock()
	m.closed = true
	for _, sh := range m.shells {
		sh.mu.Lock()
		sh.closing = true
		sh.mu.Unlock()
	}
	m.mu.Unlock()
	m.cg.close()
}

// kill stops the container: its main process and everything it started.
func (sh *shell) kill() {
	killCgroup(sh.cgroup)
}

// reap waits for the container's main process; once it is gone, the rest of
// the container goes too, as a runtime stops every process of a container
// whose main process exited (its cgroup): a job left in the background, or
// one that left the session, does not outlive the container here either.
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
		killCgroup(sh.cgroup)
	}
	close(sh.exited)
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
	klog.InfoS("container shell exited", "container", sh.key.String(), "exitCode", code)
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
	cmd.Env = m.env(dir)
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
