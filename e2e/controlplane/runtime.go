package main

// The process rules of a container runtime, kept by the simulated node so the
// debug container meets on it what it meets on a real node:
//
//   - each container runs in a PID namespace of its own (its main process is
//     PID 1 there, and the kernel drops what PID 1 has no handler for, SIGKILL
//     included, when it is sent from inside), with a mount namespace and a
//     /proc of its own (ps shows only the container);
//   - a container with targetContainerName joins its target's PID namespace,
//     and every container of a pod with shareProcessNamespace joins the pod's
//     (whose PID 1 is a pause process, as a runtime's sandbox);
//   - every process of a container is in a cgroup of its own, and when the
//     main process exits the whole cgroup is killed (as runc does), whatever
//     the processes did: setsid, a double fork, ignoring SIGTERM, another
//     process group or another PID namespace;
//   - a debug container sees the debug image's files (debug-image/: the
//     supervisor and profile.sh) over the node's own filesystem.
//
// This needs root (namespaces, mounts, cgroups); a node that cannot have them
// says so and does not start (checkRuntime), rather than run containers
// without the rules.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// initCommand and pauseCommand are the subcommands of this binary the node
// re-executes: the first process of a container (mounts, then exec of the
// container's command) and a pod's pause process.
const (
	initCommand  = "container-init"
	pauseCommand = "container-pause"
)

// runSubcommand runs a subcommand of the node's own, if os.Args names one; it
// does not return then.
func runSubcommand() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case initCommand:
		if err := containerInit(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", initCommand, err)
			os.Exit(127)
		}
	case pauseCommand:
		pause()
	}
}

// cgroups is the node's part of the cgroup v2 hierarchy: one directory for
// this start of the node, one below it for each container run and pod.
type cgroups struct {
	dir  string
	next atomic.Int64
}

// cgroupParent is the directory under the cgroup v2 mount that holds the
// simulated nodes' cgroups, one per running node process.
const cgroupParent = "breakglass-sim"

// newCgroups makes this node's cgroup directory, after stopping what nodes
// that are gone left (a node killed hard leaves its containers' processes).
func newCgroups(bootID string) (*cgroups, error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return nil, err
	}
	parent := filepath.Join(mount, cgroupParent)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("the simulated node needs a cgroup v2 hierarchy it can write (run as root): %w", err)
	}
	if entries, err := os.ReadDir(parent); err == nil {
		for _, e := range entries {
			pid, _, ok := strings.Cut(e.Name(), "-")
			if n, err := strconv.Atoi(pid); ok && err == nil && !processExists(n) {
				killCgroup(filepath.Join(parent, e.Name()))
			}
		}
	}
	dir := filepath.Join(parent, fmt.Sprintf("%d-%s", os.Getpid(), bootID))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make the node's cgroup: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("the kernel's cgroups have no cgroup.kill (Linux 5.14 or later is needed): %w", err)
	}
	return &cgroups{dir: dir}, nil
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 {
				return fields[4], nil
			}
		}
	}
	return "", errors.New("no cgroup v2 hierarchy is mounted; the simulated node needs one to stop a container's processes")
}

func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// make creates one cgroup for a container run or a pod; name says which, for
// whoever reads the hierarchy.
func (c *cgroups) make(name string) (string, error) {
	safe := strings.NewReplacer("/", "_", " ", "_").Replace(name)
	if len(safe) > 200 {
		safe = safe[:200]
	}
	dir := filepath.Join(c.dir, fmt.Sprintf("%d-%s", c.next.Add(1), safe))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("make a container's cgroup: %w", err)
	}
	return dir, nil
}

// open makes a cgroup (as make) and opens it for a child to start in
// (SysProcAttr.CgroupFD); the caller closes the descriptor once the child
// started.
func (c *cgroups) open(name string) (string, int, error) {
	dir, err := c.make(name)
	if err != nil {
		return "", -1, err
	}
	fd, err := syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		killCgroup(dir)
		return "", -1, err
	}
	return dir, fd, nil
}

// close kills every process of the node's containers and removes its cgroups.
func (c *cgroups) close() {
	killCgroup(c.dir)
}

// killCgroup kills every process in dir and its children, waits (bounded)
// until none is left, and removes the directories.
func killCgroup(dir string) {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		klog.InfoS("could not kill a cgroup", "cgroup", dir, "err", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for populated(dir) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	removeCgroup(dir)
}

// populated reports whether a process is left in dir or below it.
func populated(dir string) bool {
	raw, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	return strings.Contains(string(raw), "populated 1")
}

// removeCgroup removes dir and the cgroups below it, deepest first.
func removeCgroup(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroup(filepath.Join(dir, e.Name()))
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		klog.V(2).InfoS("could not remove a cgroup", "cgroup", dir, "err", err)
	}
}

// checkRuntime proves, once at start, that this node can keep a runtime's
// rules: a child in new PID and mount namespaces, in a cgroup of its own.
func checkRuntime(c *cgroups) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, fd, err := c.open("check")
	if err != nil {
		return err
	}
	defer killCgroup(dir)
	defer syscall.Close(fd)
	cmd := exec.Command(self, initCommand, "--proc", "--", "/bin/sh", "-c", `n=$(ls /proc | grep -c '^[0-9]'); [ $$ = 1 ] && [ "$n" -le 5 ] || { echo "pid $$, $n processes in /proc"; exit 1; }`)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
		UseCgroupFD: true,
		CgroupFD:    fd,
		Pdeathsig:   syscall.SIGKILL,
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("the simulated node cannot run a container in PID and mount namespaces of its own (it needs root): %v %s", err, out)
	}
	return nil
}

// containerCommand is how a container's first process is started: in new PID and mount
// namespaces (pid 0), or in the PID namespace of process pid (a target
// container's, or a pod's pause process) with a new mount namespace.
func containerCommand(self string, join int, initArgs []string) *exec.Cmd {
	args := append([]string{initCommand}, initArgs...)
	if join == 0 {
		return exec.Command(self, args...)
	}
	// nsenter forks into the PID namespace (a process cannot move itself
	// there) and waits for the container's process, so it is the one the
	// node waits for; it is in the container's cgroup too.
	return exec.Command("nsenter", append([]string{"--target", strconv.Itoa(join), "--pid", "--", self}, args...)...)
}

// containerAttrs are the attributes of a container's first process: its PID
// namespace (unless it joins one), a mount namespace and its cgroup.
func containerAttrs(join int, cgroupFD int) *syscall.SysProcAttr {
	flags := uintptr(syscall.CLONE_NEWNS)
	if join == 0 {
		flags |= syscall.CLONE_NEWPID
	}
	return &syscall.SysProcAttr{
		Setsid:      true,
		Setctty:     true,
		Cloneflags:  flags,
		UseCgroupFD: true,
		CgroupFD:    cgroupFD,
		Pdeathsig:   syscall.SIGKILL,
	}
}

// containerInit is the first process of a container, in its new mount
// namespace: it mounts a /proc of the container's PID namespace and the
// debug image's files, then becomes the container's command (which keeps
// its process id: PID 1 of a namespace of its own).
//
//	container-init [--proc] [--image DIR] [--dir DIR] -- command [args...]
func containerInit(args []string) error {
	var proc bool
	var image, dir string
	for len(args) > 0 && args[0] != "--" {
		switch args[0] {
		case "--proc":
			proc = true
		case "--image", "--dir":
			if len(args) < 2 {
				return fmt.Errorf("%s needs a value", args[0])
			}
			if args[0] == "--image" {
				image = args[1]
			} else {
				dir = args[1]
			}
			args = args[1:]
		default:
			return fmt.Errorf("unknown flag %q", args[0])
		}
		args = args[1:]
	}
	if len(args) < 2 {
		return errors.New("usage: container-init [--proc] [--image DIR] [--dir DIR] -- command [args...]")
	}
	argv := args[1:]
	// The mount namespace is this thread's; mounts and exec happen on it.
	runtime.LockOSThread()
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the container's mounts private: %w", err)
	}
	if proc {
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount the container's /proc: %w", err)
		}
	}
	if image != "" {
		if err := showImage(image); err != nil {
			return err
		}
	}
	if dir != "" {
		if err := os.Chdir(dir); err != nil {
			return err
		}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	return syscall.Exec(path, argv, os.Environ())
}

// showImage lays the image's directories over the node's: each top-level
// directory of image (etc, usr) becomes a read-only overlay whose upper
// layer is the image's, so its files are where the image has them and the
// node's tools stay usable beside them.
func showImage(image string) error {
	entries, err := os.ReadDir(image)
	if err != nil {
		return fmt.Errorf("read the debug image's files: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		target := "/" + e.Name()
		if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
			return fmt.Errorf("the debug image's %s has no directory of the node to lie over", target)
		}
		lower := filepath.Join(image, e.Name()) + ":" + target
		if err := unix.Mount("overlay", target, "overlay", unix.MS_RDONLY, "lowerdir="+lower); err != nil {
			return fmt.Errorf("show the debug image's %s: %w", target, err)
		}
	}
	return nil
}

// pause is a pod's pause process: PID 1 of the pod's shared PID namespace,
// it only reaps the orphans the pod's containers leave.
func pause() {
	sigs := make(chan os.Signal, 8)
	// Caught, so that a signal from inside the pod does nothing (the node
	// stops the pod through its cgroup).
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM,
		syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTSTP, syscall.SIGPIPE)
	for range sigs {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
		}
	}
}
