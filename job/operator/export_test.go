package operator

// The tests of package operator_test reach the unexported parts they assert
// on through these names. Only tests see them.

// SecretApplyPatch is secretApplyPatch: the golden apply body.
var SecretApplyPatch = secretApplyPatch
