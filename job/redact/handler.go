package redact

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
)

// Handler is a slog.Handler that redacts, before the handler it wraps sees
// them, the message and every attribute of a record: strings, errors,
// values that format to a string holding a secret, LogValuers (resolved
// first) and groups to any depth. Attributes given to WithAttrs are kept
// unformatted and redacted with each record, so a value the registry learns
// after a logger was derived is still caught.
type Handler struct {
	inner   slog.Handler
	secrets *Registry
	ops     []op // WithAttrs/WithGroup calls, in order

	mu    *sync.Mutex
	built *builtHandler
}

type op struct {
	group string
	attrs []slog.Attr
}

type builtHandler struct {
	gen uint64
	h   slog.Handler
}

// NewHandler wraps inner so that nothing in secrets reaches it.
func NewHandler(inner slog.Handler, secrets *Registry) *Handler {
	return &Handler{inner: inner, secrets: secrets, mu: &sync.Mutex{}}
}

// Enabled reports whether the wrapped handler handles level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle redacts r and passes it on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.secrets.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.handler().Handle(ctx, out)
}

// handler is inner with the derived attributes and groups applied, rebuilt
// when the registry has learnt a value since.
func (h *Handler) handler() slog.Handler {
	if len(h.ops) == 0 {
		return h.inner
	}
	gen := h.secrets.generation()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.built != nil && h.built.gen == gen {
		return h.built.h
	}
	in := h.inner
	for _, o := range h.ops {
		if o.group != "" {
			in = in.WithGroup(o.group)
			continue
		}
		attrs := make([]slog.Attr, len(o.attrs))
		for i, a := range o.attrs {
			attrs[i] = h.attr(a)
		}
		in = in.WithAttrs(attrs)
	}
	h.built = &builtHandler{gen: gen, h: in}
	return in
}

// WithAttrs returns a Handler that adds attrs to every record.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(op{attrs: attrs})
}

// WithGroup returns a Handler that nests what follows in group name.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(op{group: name})
}

func (h *Handler) with(o op) *Handler {
	ops := make([]op, len(h.ops), len(h.ops)+1)
	copy(ops, h.ops)
	return &Handler{inner: h.inner, secrets: h.secrets, ops: append(ops, o), mu: &sync.Mutex{}}
}

// attr redacts one attribute, groups recursively.
func (h *Handler) attr(a slog.Attr) slog.Attr {
	a.Key = h.secrets.String(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(h.secrets.String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		attrs := make([]slog.Attr, len(group))
		for i, g := range group {
			attrs[i] = h.attr(g)
		}
		a.Value = slog.GroupValue(attrs...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			a.Value = slog.StringValue(h.secrets.String(x.Error()))
		case []byte:
			// %+v of bytes is a list of numbers, which no form matches.
			a.Value = slog.StringValue(h.secrets.String(string(x)))
		default:
			// A value the wrapped handler formats itself (a slice, a
			// struct, a Stringer): if its text holds a secret, only the
			// redacted text goes on.
			// The JSON form is the one a JSON handler writes ([]byte
			// inside a map or struct as base64).
			s := fmt.Sprintf("%+v", x)
			if red := h.secrets.String(s); red != s {
				a.Value = slog.StringValue(red)
			} else if j, err := json.Marshal(x); err == nil && h.secrets.String(string(j)) != string(j) {
				a.Value = slog.StringValue(h.secrets.String(string(j)))
			} else {
				a.Value = v
			}
		}
	default:
		a.Value = v
	}
	return a
}

// Redacts reports whether h redacts through secrets.
func (h *Handler) Redacts(secrets *Registry) bool { return h.secrets == secrets }
