// Package mlog is a stand-in for monis.app/mlog with exactly the API the
// Azure Workload Identity webhook (cmd/webhook, pkg/webhook) calls: leveled,
// structured logging, here on log/slog's JSON handler on stderr, and the
// logr.Logger controller-runtime takes. What the webhook does to a pod does
// not depend on it; only its own log lines do.
package mlog

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
)

// LogLevel is a verbosity, from the least verbose (warning) to all.
type LogLevel string

// The levels the webhook names.
const (
	LevelWarning LogLevel = "warning"
	LevelInfo    LogLevel = "info"
	LevelDebug   LogLevel = "debug"
	LevelTrace   LogLevel = "trace"
	LevelAll     LogLevel = "all"
)

// LogFormat is the output format; this stand-in writes JSON for both.
type LogFormat string

// The formats the webhook names.
const (
	FormatJSON LogFormat = "json"
	FormatCLI  LogFormat = "cli"
)

// LogSpec is the level and format the webhook's --log-level selects.
type LogSpec struct {
	Level  LogLevel
	Format LogFormat
}

var (
	level   = new(slog.LevelVar)
	handler = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	current = LevelInfo
)

// slogLevel maps a LogLevel to slog's scale (trace and all below debug).
func slogLevel(l LogLevel) (slog.Level, error) {
	switch l {
	case "", LevelInfo:
		return slog.LevelInfo, nil
	case LevelWarning:
		return slog.LevelWarn, nil
	case LevelDebug:
		return slog.LevelDebug, nil
	case LevelTrace:
		return slog.LevelDebug - 4, nil
	case LevelAll:
		return slog.LevelDebug - 8, nil
	}
	return 0, fmt.Errorf("unknown log level %q", l)
}

// ValidateAndSetLogLevelAndFormatGlobally sets the level of every logger.
func ValidateAndSetLogLevelAndFormatGlobally(_ context.Context, spec LogSpec) error {
	l, err := slogLevel(spec.Level)
	if err != nil {
		return err
	}
	level.Set(l)
	current = spec.Level
	if current == "" {
		current = LevelInfo
	}
	return nil
}

// Enabled reports whether messages of l are logged.
func Enabled(l LogLevel) bool {
	sl, err := slogLevel(l)
	return err == nil && sl >= level.Level()
}

// Setup returns the function to defer in main (it flushes nothing here).
func Setup() func() { return func() {} }

// Logr is the logger controller-runtime logs through.
func Logr() logr.Logger { return logr.FromSlogHandler(handler) }

// Fatal logs err and exits 1.
func Fatal(err error, keysAndValues ...any) {
	slog.New(handler).Error("fatal", append([]any{"error", err}, keysAndValues...)...)
	os.Exit(1)
}

// Logger is a named logger with values.
type Logger interface {
	WithName(name string) Logger
	WithValues(keysAndValues ...any) Logger
	Error(msg string, err error, keysAndValues ...any)
	Warning(msg string, keysAndValues ...any)
	Info(msg string, keysAndValues ...any)
	Debug(msg string, keysAndValues ...any)
}

type logger struct{ l *slog.Logger }

// New returns the root logger.
func New() Logger { return logger{slog.New(handler)} }

func (g logger) WithName(name string) Logger            { return logger{g.l.With("logger", name)} }
func (g logger) WithValues(keysAndValues ...any) Logger { return logger{g.l.With(keysAndValues...)} }
func (g logger) Error(msg string, err error, keysAndValues ...any) {
	g.l.Error(msg, append([]any{"error", err}, keysAndValues...)...)
}
func (g logger) Warning(msg string, keysAndValues ...any) { g.l.Warn(msg, keysAndValues...) }
func (g logger) Info(msg string, keysAndValues ...any)    { g.l.Info(msg, keysAndValues...) }
func (g logger) Debug(msg string, keysAndValues ...any)   { g.l.Debug(msg, keysAndValues...) }
