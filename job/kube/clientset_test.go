package kube

import (
	"k8s.io/client-go/kubernetes"
)

// typed serves the engine's API interfaces from a typed clientset: in
// tests, client-go's fake with its field-managed object tracker, which runs
// real server-side apply.
type typed struct{ cs kubernetes.Interface }

func (t typed) Secrets(ns string) SecretInterface       { return t.cs.CoreV1().Secrets(ns) }
func (t typed) ConfigMaps(ns string) ConfigMapInterface { return t.cs.CoreV1().ConfigMaps(ns) }
func (t typed) Leases(ns string) LeaseInterface         { return t.cs.CoordinationV1().Leases(ns) }

func (t typed) Events(ns string) EventInterface { return t.cs.EventsV1().Events(ns) }
