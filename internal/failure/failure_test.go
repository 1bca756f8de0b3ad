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

// A List is one line in a log, yet each of its errors can still be told
// apart, and one permanent error makes the whole list permanent.
func TestList(t *testing.T) {
	errA, errB := errors.New("a refused"), errors.New("b timed out")
	l := List{errA, Permanent(errB)}
	assert.Equal(t, "a refused; b timed out", l.Error())
	assert.ErrorIs(t, l, errA)
	assert.ErrorIs(t, l, errB)
	assert.True(t, IsPermanent(l))
	assert.False(t, IsPermanent(List{errA}))
}
