package recovery

import "errors"

// ErrOperatorFailed means rancher/scc-operator marked the Registration made
// from our Secret Failed. Permanent when nothing this run can do helps (a
// cause that needs a person, a recovery that failed again, three in a
// row); transient when the recovery could not start (the operator not
// running, the record not written, the Secret changed meanwhile).
var ErrOperatorFailed = errors.New("rancher/scc-operator failed the registration")
