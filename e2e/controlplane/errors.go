package controlplane

import "errors"

// Sentinels returned by New, Stop and the Kubelet. The errors wrapping them
// carry the tail of the failing component's log.
var (
	// ErrBinaryMissing means the binary directory lacks one of etcd,
	// kube-apiserver, kube-controller-manager or kubectl.
	ErrBinaryMissing = errors.New("control-plane binary missing")
	// ErrExited means a component exited while it should have been serving.
	ErrExited = errors.New("control-plane component exited")
	// ErrNotReady means a component did not answer its health check in time.
	ErrNotReady = errors.New("control-plane component not ready")
	// ErrUnsupportedPod means the Kubelet cannot run a pod as a process: it
	// has more than one container or init containers, or its environment
	// uses a source the Kubelet does not compute (for example
	// resourceFieldRef).
	ErrUnsupportedPod = errors.New("pod not supported by the process kubelet")
	// ErrEnvSource means a ConfigMap or Secret a pod's environment needs is
	// missing (a real kubelet reports CreateContainerConfigError).
	ErrEnvSource = errors.New("pod environment source missing")
	// ErrStopped means the plane was stopped before a process could be
	// started on it.
	ErrStopped = errors.New("control plane stopped")
)
