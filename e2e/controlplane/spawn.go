package controlplane

import (
	"os/exec"
	"runtime"
	"sync"
)

// spawner starts every process of a plane from one goroutine locked to its
// OS thread. The children are started with a parent-death signal (see
// sysProcAttr), which Linux sends when the forking *thread* ends, not the
// process; forking from an arbitrary goroutine could therefore kill etcd or
// the API server in the middle of a test when the Go runtime retires that
// thread. The locked thread lives until close, so the signal fires only when
// the test binary dies (a timeout, a crash) or after Stop.
type spawner struct {
	reqs chan spawnReq
	once sync.Once
	// mu orders start against close: a start after close fails instead of
	// sending on a closed channel.
	mu     sync.RWMutex
	closed bool
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq)}
	go func() {
		// Never unlocked: the thread ends with this goroutine.
		runtime.LockOSThread()
		for r := range s.reqs {
			r.err <- r.cmd.Start()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrStopped
	}
	r := spawnReq{cmd: cmd, err: make(chan error, 1)}
	s.reqs <- r
	return <-r.err
}

func (s *spawner) close() {
	s.once.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		close(s.reqs)
	})
}
