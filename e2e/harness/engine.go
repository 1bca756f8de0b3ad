package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Result is one run of the engine binary.
type Result struct {
	Code           int
	Stdout, Stderr string
	Took           time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d after %s\n--- stdout\n%s--- stderr\n%s", r.Code, r.Took, r.Stdout, r.Stderr)
}

// RunEngine runs the engine binary with only env (nothing of the test's own
// environment leaks in, so no real endpoint can be reached by accident).
// When ctx ends the engine gets SIGTERM (StartEngine).
func RunEngine(t testing.TB, ctx context.Context, env []string, args ...string) Result {
	t.Helper()
	wait, err := StartEngine(ctx, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := wait()
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Stderr)
	}
	return res
}

// StartEngine starts the engine binary with only env (and PATH) and returns
// at once; wait returns its result. When ctx ends the engine gets SIGTERM,
// as from a kubelet, so it can still release the Lease.
func StartEngine(ctx context.Context, env []string, args ...string) (wait func() (Result, error), err error) {
	if bins.engine == "" {
		return nil, errors.New("the engine is not built: the package's TestMain must call harness.Main")
	}
	cmd := exec.CommandContext(ctx, bins.engine, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start engine: %w", err)
	}
	return func() (Result, error) {
		err := cmd.Wait()
		res := Result{Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(start)}
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			res.Code = exit.ExitCode()
		case err != nil:
			return res, fmt.Errorf("run engine: %w", err)
		}
		return res, nil
	}, nil
}

// lockedBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
