package job

import (
	"log/slog"
)

// Secret is a string that never reaches a log or an error message: its
// String and LogValue say REDACTED. Reveal returns the value for the one
// place that must write it (the Secret's data).
type Secret string

// Reveal returns the secret value.
func (s Secret) Reveal() string { return string(s) }

// String implements fmt.Stringer so %v and %s cannot leak it.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "REDACTED"
}

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
