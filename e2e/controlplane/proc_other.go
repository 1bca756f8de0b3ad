//go:build !linux

package controlplane

import "syscall"

// sysProcAttr has no parent-death signal outside Linux: there a killed test
// binary can leave its components running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
