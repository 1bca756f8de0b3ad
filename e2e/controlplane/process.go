package controlplane

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Process is one child process of the harness and its log: the harness's
// one supervisor, for the plane's components, rancher/scc-operator and the
// cluster's CoreDNS alike.
type Process struct {
	// Name is what errors and logs call it.
	Name string
	// LogPath is the file its standard output and error go to.
	LogPath string

	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	waitErr error         // cmd.Wait's result, valid after done
}

// killWait bounds the wait for a process after SIGKILL.
const killWait = 5 * time.Second

// StartProcess starts cmd as a process of no plane, its output into a new
// file at logPath.
func StartProcess(name, logPath string, cmd *exec.Cmd) (*Process, error) {
	return startProcess(name, logPath, cmd, (*exec.Cmd).Start)
}

// StartProcess starts cmd the way the plane starts its own components: from
// the plane's spawning thread, with the parent-death signal, so a process
// that plays a cluster component (an operator, a controller) dies with the
// test binary even when no cleanup runs. It overwrites cmd.SysProcAttr. The
// caller must Stop it before the plane's Stop: after that the plane starts
// nothing (ErrStopped).
func (p *Plane) StartProcess(name, logPath string, cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = sysProcAttr()
	return startProcess(name, logPath, cmd, p.spawn.start)
}

func startProcess(name, logPath string, cmd *exec.Cmd, start func(*exec.Cmd) error) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := start(cmd); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitErr is how the process ended ("exit status 0" for a clean exit);
// nil while it runs.
func (p *Process) ExitErr() error {
	if !p.Exited() {
		return nil
	}
	if p.waitErr == nil {
		return fmt.Errorf("exit status 0")
	}
	return p.waitErr
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop sends SIGTERM, waits grace, then SIGKILL. It returns nil when the
// process had exited or ended on SIGTERM, and an error naming it when it
// had to be killed.
func (p *Process) Stop(grace time.Duration) error {
	if p.Exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return fmt.Errorf("%s: did not stop in %v on SIGTERM, killed", p.Name, grace)
	case <-time.After(killWait):
		return fmt.Errorf("%s: pid %d still running after SIGKILL", p.Name, p.cmd.Process.Pid)
	}
}

// Log is the whole log so far.
func (p *Process) Log() string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	return string(b)
}

// Tail is the last n lines of the log (reading at most its last 64 KiB).
func (p *Process) Tail(n int) string { return tail(p.LogPath, n) }

// tail returns the last n lines of the file at path (reading at most its
// last 64 KiB).
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer func() { _ = f.Close() }()
	const window = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(fi.Size()-window, io.SeekStart)
	}
	b, err := io.ReadAll(io.LimitReader(f, window))
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
