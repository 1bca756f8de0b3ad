package failure

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPermanentKeepsMessageAndCause(t *testing.T) {
	cause := fmt.Errorf("read config: %w", fs.ErrNotExist)
	err := fmt.Errorf("phase 3: %w", Permanent(cause))

	assert.True(t, IsPermanent(err))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Equal(t, "phase 3: read config: file does not exist", err.Error())
	assert.False(t, IsPermanent(cause))
	assert.NoError(t, Permanent(nil))
	assert.False(t, IsPermanent(errors.New("dial tcp: connection refused")))
}
