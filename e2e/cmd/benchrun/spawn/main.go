// Command spawn runs one command as its child and reports the child's own
// peak RSS and wall time, for benchrun, which cannot read them of its own
// children: Linux carries the RSS high-water mark of the process that calls
// exec over to the new program (exec_mmap), and Go starts children with
// vfork semantics, so each would report at least benchrun's RSS. This
// program is small, so the floor it passes on lies far below the engine's.
//
//	spawn COMMAND [ARG…]
//
// It passes its standard streams and environment on, exits with the child's
// exit code (128+signal when the child was killed), and writes
// "wallNs=N maxrssKiB=N" to file descriptor 3.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	report := os.NewFile(3, "report")
	if len(args) == 0 || report == nil {
		fmt.Fprintln(os.Stderr, "spawn: usage: spawn COMMAND [ARG…] with a report pipe on fd 3")
		return 125
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "spawn:", err)
		return 126
	}
	_ = cmd.Wait()
	wall := time.Since(start)
	var maxrss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		maxrss = int64(ru.Maxrss)
	}
	fmt.Fprintf(report, "wallNs=%d maxrssKiB=%d\n", wall.Nanoseconds(), maxrss)
	_ = report.Close()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}
