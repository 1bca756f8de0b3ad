package job

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe to read while another goroutine writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// status in a pod that `kubectl run -i` started holds its verdict until
// kubectl's attach closes stdin, so the paste never prints nothing; it
// prints at once anywhere else.
func TestStatusWaitsForKubectlAttach(t *testing.T) {
	inPod := func(k string) string {
		if k == "KUBERNETES_SERVICE_HOST" {
			return "10.0.0.1"
		}
		return ""
	}
	t.Run("in a pod with stdin on a pipe: after the attach closes it", func(t *testing.T) {
		r, w, err := os.Pipe()
		require.NoError(t, err)
		defer r.Close()
		var out syncBuffer
		gated := AfterAttach(&out, r, inPod)
		done := make(chan struct{})
		go func() { _, _ = gated.Write([]byte("Registered: …\n")); close(done) }()
		time.Sleep(200 * time.Millisecond)
		assert.Empty(t, out.String(), "nothing written before kubectl attached")
		require.NoError(t, w.Close()) // kubectl attached; its input (none) ended
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatal("the write still waits after stdin closed")
		}
		assert.Equal(t, "Registered: …\n", out.String())
	})
	t.Run("no pipe, not in a pod, or a kubeconfig: at once", func(t *testing.T) {
		devnull, err := os.Open(os.DevNull)
		require.NoError(t, err)
		defer devnull.Close()
		r, w, err := os.Pipe()
		require.NoError(t, err)
		defer r.Close()
		defer w.Close()
		for name, c := range map[string]struct {
			stdin  *os.File
			getenv func(string) string
		}{
			"a pod without -i (/dev/null)": {devnull, inPod},
			"a workstation":                {r, func(string) string { return "" }},
			"a pod with a kubeconfig": {r, func(k string) string {
				return map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBECONFIG": "/k"}[k]
			}},
		} {
			var out bytes.Buffer
			start := time.Now()
			_, err := AfterAttach(&out, c.stdin, c.getenv).Write([]byte("x"))
			require.NoError(t, err)
			assert.Less(t, time.Since(start), time.Second, name)
			assert.Equal(t, "x", out.String(), name)
		}
	})
}
