package status

import (
	"errors"
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
)

// NoCluster is the verdict when status has no cluster to ask: no
// kubeconfig (flag, KUBECONFIG, ~/.kube/config) and not in a pod, or one
// that cannot be used. It names --kubeconfig and KUBECONFIG, the settings
// a person would change, instead of client-go's advice to set
// KUBERNETES_MASTER. flag is --kubeconfig's value, env KUBECONFIG's.
func NoCluster(err error, flag, env string, exits ExitCodes) Verdict {
	var next string
	switch {
	case flag != "":
		next = fmt.Sprintf("--kubeconfig %s cannot be used (%v); pass the kubeconfig of the cluster to check", flag, err)
	case errors.Is(err, clientcmd.ErrEmptyConfig):
		where := "KUBECONFIG is unset and ~/.kube/config holds no cluster"
		if env != "" {
			where = fmt.Sprintf("KUBECONFIG=%s names no usable kubeconfig", env)
		}
		next = where + ", and this is not a pod in a cluster: set KUBECONFIG or pass --kubeconfig with the cluster's kubeconfig, or run status in a pod of the cluster"
	default:
		next = fmt.Sprintf("the kubeconfig cannot be used (%v); fix it, or point KUBECONFIG or --kubeconfig at the cluster's kubeconfig", err)
	}
	v := unknown("no cluster to ask", next)
	v.ExitCode = exits.of(v.State)
	return v
}
