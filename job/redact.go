package job

import (
	"encoding/base64"
	"strings"
)

// redactedError is an error whose message has the run's secrets replaced by
// REDACTED, for the log lines and the exit message that print it. A peer's
// error may quote what it was sent: an admission webhook that denies the
// Secret's apply can answer with the whole object, the registration code
// and the attested document base64-encoded in its data. Unwrap still
// reaches the original, so errors.Is/As and failure.IsPermanent classify it
// as before; only its text changes.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns err with every non-empty secret, as it is and
// base64-encoded (as a Secret's data carries it), replaced by REDACTED in
// its message; err itself when its message holds none of them.
func redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var pairs []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		pairs = append(pairs, s, "REDACTED",
			base64.StdEncoding.EncodeToString([]byte(s)), "REDACTED",
			base64.RawStdEncoding.EncodeToString([]byte(s)), "REDACTED")
	}
	redacted := strings.NewReplacer(pairs...).Replace(msg)
	if redacted == msg {
		return err
	}
	return &redactedError{err: err, msg: redacted}
}
