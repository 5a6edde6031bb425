// Command breakglass-supervisor is the main process of a break-glass debug
// container. It starts the interactive shell on the container's terminal and
// ends when the session does, so that the container runtime then stops every
// process of the container.
//
// Why a process of its own, and not the shell: a container without a shared
// PID namespace has its main process as PID 1 there, and the kernel drops
// every signal sent to PID 1 from inside its namespace that has no handler,
// SIGKILL included. A shell that is PID 1 cannot be ended from beside it, and
// a watcher beside the shell is a process of the person's own, which they can
// stop. This supervisor is PID 1 instead: the person can neither kill nor
// stop it (SIGKILL and SIGSTOP from inside are dropped, every other signal is
// caught here and ignored), and it cannot be traced (not dumpable).
//
// It ends, exits and so ends the container:
//   - when the terminal's size is 1 row by 1 column: the server's "end" sent
//     through the attach at the session's end, on revocation and on a lock
//     (breakglass_shared::terminal::END_SIZE; no person's terminal is that
//     small, the server never lets one through);
//   - at the deadline in BREAKGLASS_DEADLINE (Unix seconds): the session's
//     ceiling with every extension and a grace, the backstop for when the
//     server cannot reach the container to end it;
//   - on SIGTERM from the runtime (a pod deleted, a copy pod removed);
//   - when the shell exits.
//
// Before it exits it kills what is left: as PID 1, every process of its
// namespace; in a shared namespace (process access, a pod sharing its
// process namespace), the shell's process group, and the runtime stops the
// rest of the container (its cgroup).
//
// Usage: breakglass-supervisor [command [args...]] (default: /bin/sh -i).
// Standard library only, built static: it runs in the debug image as in the
// test node.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// DeadlineEnv names the session's deadline, Unix seconds.
const DeadlineEnv = "BREAKGLASS_DEADLINE"

// endRows and endCols are the terminal size that asks the container to end.
const endRows, endCols = 1, 1

// lookEvery is how often the terminal's size and the clock are looked at: a
// resize signal reaches the terminal's foreground process group (the shell,
// or the command it runs), not this process, so the size is polled. One
// ioctl a look; no process is started.
const lookEvery = 250 * time.Millisecond

// Exit codes, besides the shell's own status.
const (
	exitUsage    = 2   // BREAKGLASS_DEADLINE missing or not a number, or the shell could not start
	exitEnded    = 0   // the server asked the container to end
	exitDeadline = 124 // the deadline passed (as timeout(1) reports it)
	exitTerm     = 143 // SIGTERM from the runtime
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	deadline, err := readDeadline(os.Getenv(DeadlineEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "breakglass-supervisor: %v\n", err)
		return exitUsage
	}
	if len(args) == 0 {
		args = []string{"/bin/sh", "-i"}
	}
	// Not dumpable: no ptrace of this process, no reading its memory.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)

	// A handler for each signal a person could send (a signal that is caught
	// reaches PID 1; one that is ignored would stay ignored in the shell and
	// its commands, and Ctrl-C would stop nothing).
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGCHLD, syscall.SIGINT, syscall.SIGQUIT,
		syscall.SIGHUP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGPIPE, syscall.SIGALRM)

	if !time.Now().Before(deadline) {
		fmt.Fprintf(os.Stderr, "breakglass-supervisor: the session's deadline (%s) has passed\n", deadline.UTC().Format(time.RFC3339))
		return exitDeadline
	}
	tty := isTerminal(0)
	shell, err := start(args, tty)
	if err != nil {
		fmt.Fprintf(os.Stderr, "breakglass-supervisor: start %s: %v\n", args[0], err)
		return exitUsage
	}

	tick := time.NewTicker(lookEvery)
	defer tick.Stop()
	for {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGTERM:
				return end(shell, exitTerm, "stopped by the container runtime")
			case syscall.SIGCHLD:
				if code, done := reap(shell); done {
					return end(shell, code, "")
				}
			}
		case <-tick.C:
			if code, done := reap(shell); done {
				return end(shell, code, "")
			}
			if tty && endAsked(0) {
				return end(shell, exitEnded, "")
			}
			if !time.Now().Before(deadline) {
				return end(shell, exitDeadline, "the session's time is over; the debug container ends")
			}
		}
	}
}

// readDeadline parses the deadline; a debug container without one is refused,
// as it would have no backstop.
func readDeadline(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, errors.New(DeadlineEnv + " is not set: a debug container needs the session's deadline (Unix seconds)")
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || secs <= 0 {
		return time.Time{}, fmt.Errorf("%s=%q is not a time in Unix seconds", DeadlineEnv, v)
	}
	return time.Unix(secs, 0), nil
}

// start runs the shell in a process group of its own, made the terminal's
// foreground group (so job control and Ctrl-C work as in any shell).
func start(args []string, tty bool) (int, error) {
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Foreground: tty, Ctty: 0},
	}
	path := args[0]
	if !strings.Contains(path, "/") {
		return 0, fmt.Errorf("give the command's full path")
	}
	return syscall.ForkExec(path, args, attr)
}

// reap collects every ended child (as PID 1 it inherits the orphans of its
// namespace) and reports the shell's exit code once the shell has ended.
func reap(shell int) (int, bool) {
	code, done := 0, false
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return code, done
		}
		if pid == shell {
			done = true
			switch {
			case ws.Exited():
				code = ws.ExitStatus()
			case ws.Signaled():
				code = 128 + int(ws.Signal())
			}
		}
	}
}

// end kills what is left of the session and returns the exit code.
func end(shell, code int, why string) int {
	if os.Getpid() == 1 {
		// Every process of the namespace but this one.
		_ = syscall.Kill(-1, syscall.SIGKILL)
	} else {
		_ = syscall.Kill(-shell, syscall.SIGKILL)
		_ = syscall.Kill(shell, syscall.SIGKILL)
	}
	reap(shell)
	if why != "" {
		// Written once nothing else runs, from aside: a terminal set to stop
		// background writers (stty tostop) would hold this write, and the
		// container ends whether it is shown or not.
		written := make(chan struct{})
		go func() {
			fmt.Fprintf(os.Stderr, "\r\nbreakglass-supervisor: %s\r\n", why)
			close(written)
		}()
		select {
		case <-written:
		case <-time.After(200 * time.Millisecond):
		}
	}
	return code
}

type winsize struct{ Row, Col, X, Y uint16 }

func getSize(fd int) (winsize, bool) {
	var ws winsize
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	return ws, errno == 0
}

func isTerminal(fd int) bool {
	_, ok := getSize(fd)
	return ok
}

// endAsked reports whether the terminal's size is the server's "end".
func endAsked(fd int) bool {
	ws, ok := getSize(fd)
	return ok && ws.Row == endRows && ws.Col == endCols
}
