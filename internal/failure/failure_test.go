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

// A settling error keeps its message and its cause, and is not permanent
// by itself: the run decides (job's first-contact window).
func TestSettlingKeepsMessageAndIsNotPermanent(t *testing.T) {
	cause := errors.New("ARM answered 403 AuthorizationFailed")
	err := fmt.Errorf("phase 2 prove: %w", Settling(cause))

	assert.True(t, IsSettling(err))
	assert.False(t, IsPermanent(err))
	assert.ErrorIs(t, err, cause)
	assert.Equal(t, "phase 2 prove: ARM answered 403 AuthorizationFailed", err.Error())
	assert.True(t, IsPermanent(Permanent(err)) && IsSettling(Permanent(err)), "marked permanent later, it is both")
	assert.NoError(t, Settling(nil))
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
