package job

import (
	"encoding/base64"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rancher/registration-engine/providers/failure"
)

func TestRedact(t *testing.T) {
	sentinel := errors.New("denied")
	code := "REGCODE-123"
	tests := map[string]struct {
		err  error
		want string
	}{
		"the code as it is": {fmt.Errorf("apply: %w: regCode %s", sentinel, code), "apply: denied: regCode REDACTED"},
		"the code base64-encoded, as in a Secret's data": {
			fmt.Errorf("apply: %w: {\"regCode\":%q}", sentinel, base64.StdEncoding.EncodeToString([]byte(code))), `apply: denied: {"regCode":"REDACTED"}`},
		"nothing secret: unchanged": {fmt.Errorf("apply: %w", sentinel), "apply: denied"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := redact(failure.Permanent(tc.err), code, "")
			assert.Equal(t, tc.want, err.Error())
			assert.ErrorIs(t, err, sentinel, "still classified by its sentinel")
			assert.True(t, failure.IsPermanent(err), "still permanent")
		})
	}
}
