package kube

// The tests of package kube_test (external, so that they can use kubetest,
// which imports kube) reach the unexported parts they assert on through
// these names. Only tests see them.

// MaxNote is maxNote: the API server's limit on an Event's note.
const MaxNote = maxNote

// FieldManagerOf is l.fieldManager(): the field manager l's writes carry.
func FieldManagerOf(l *Lease) string { return l.fieldManager() }
