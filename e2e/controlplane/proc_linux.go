package controlplane

import "syscall"

// sysProcAttr makes the kernel kill a component when the test binary dies
// without running Stop (a test timeout, a crash), so no etcd or API server
// outlives it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
