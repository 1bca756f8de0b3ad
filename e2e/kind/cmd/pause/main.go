// Command pause is the sandbox program of the offline kind node: every pod's
// first container runs it to hold the pod's namespaces open. It sleeps until
// SIGTERM or SIGINT and then exits 0, so a pod stops at once instead of
// waiting for SIGKILL. It is built into the node image under the name
// containerd's sandbox_image gives (see e2e/kind/images.sh); without it no pod
// starts.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
