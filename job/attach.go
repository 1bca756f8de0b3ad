package job

import (
	"io"
	"os"
	"sync"
	"time"
)

// AttachWait bounds how long status in a pod waits for `kubectl run -i`
// to attach before it prints (AfterAttach).
const AttachWait = 5 * time.Second

// AfterAttach is stdout for `registration-engine status` run as the NOTES
// print it, `kubectl run … --rm -i … --image=<the engine's image> …`: kubectl
// creates the pod, waits for it to run, then attaches; status's reads take
// well under a second, so its verdict could be written and the container
// gone before the attach, and kubectl then printed nothing at all (measured
// on kind: one paste in four; the fallback to the logs races --rm). A
// container that kubectl run -i starts has its stdin open on a pipe
// (stdin: true, stdinOnce: true), which kubectl's attach closes once its
// own input ends, and a terminal's input only when the person ends it. So,
// in a pod (KUBERNETES_SERVICE_HOST, no kubeconfig) whose stdin is a pipe,
// the first write waits until stdin is closed or gives a byte, or AttachWait
// has passed since the start; a pod without -i has /dev/null there, a
// workstation a terminal or a file, and nothing waits.
func AfterAttach(stdout io.Writer, stdin *os.File, getenv func(string) string) io.Writer {
	if getenv("KUBERNETES_SERVICE_HOST") == "" || getenv("KUBECONFIG") != "" || stdin == nil {
		return stdout
	}
	fi, err := stdin.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return stdout
	}
	attached := make(chan struct{})
	go func() {
		var b [1]byte
		_, _ = stdin.Read(b[:]) // EOF, an error or a byte: kubectl is there
		close(attached)
	}()
	return &gatedWriter{w: stdout, open: attached, deadline: time.NewTimer(AttachWait).C}
}

// gatedWriter holds its first write until open is closed or deadline fires.
type gatedWriter struct {
	w        io.Writer
	open     <-chan struct{}
	deadline <-chan time.Time
	once     sync.Once
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.once.Do(func() {
		select {
		case <-g.open:
		case <-g.deadline:
		}
	})
	return g.w.Write(p)
}
