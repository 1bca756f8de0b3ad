// Package redact keeps the run's secret values out of everything the engine
// emits. A Registry knows every secret the run has learnt (the configured
// registration code, the code kept from the existing Secret, the attested
// document and its signature) and replaces each, in every encoding a peer
// may echo it in, by REDACTED. Handler applies it to every log line, and
// the Event recorder to every note, so that a peer's error quoting what it
// was sent cannot carry a secret out through a retry warning, a summary or
// an Event.
package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Redacted replaces a secret value.
const Redacted = "REDACTED"

// Registry is the set of the run's secret values. The zero value is empty
// and ready; a nil *Registry redacts nothing (a test without secrets). It is
// safe for concurrent use: the run adds values as it learns them while
// other goroutines log.
type Registry struct {
	mu       sync.RWMutex
	values   map[string]bool // registered values
	known    map[string]bool // their forms
	forms    []string
	replacer *strings.Replacer
	gen      uint64
}

// New returns a Registry holding values.
func New(values ...string) *Registry {
	r := &Registry{}
	r.Add(values...)
	return r
}

// Add registers secret values; empty ones are ignored. Each value is
// registered in every form a peer may echo: as it is, base64 (standard and
// URL alphabets, with and without padding, as a Secret's data or a JWT
// carries it), and quoted as a JSON or Go string (once and twice, for an
// error that quotes a request that quoted it), with and without JSON's
// HTML escapes.
func (r *Registry) Add(values ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	added := false
	for _, v := range values {
		if v == "" || r.values[v] {
			continue
		}
		if r.values == nil {
			r.values, r.known = map[string]bool{}, map[string]bool{}
		}
		r.values[v] = true
		for _, f := range Forms(v) {
			if !r.known[f] {
				r.known[f] = true
				r.forms = append(r.forms, f)
			}
		}
		added = true
	}
	if !added {
		return
	}
	// Longest first: at a position where both a document and a value
	// inside it start, the whole document goes.
	sort.SliceStable(r.forms, func(i, j int) bool { return len(r.forms[i]) > len(r.forms[j]) })
	pairs := make([]string, 0, 2*len(r.forms))
	for _, f := range r.forms {
		pairs = append(pairs, f, Redacted)
	}
	r.replacer = strings.NewReplacer(pairs...)
	r.gen++
}

// Forms is every encoding of v that Add registers.
func Forms(v string) []string {
	b := []byte(v)
	forms := []string{
		v,
		base64.StdEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
	}
	quoted := []string{v}
	for range 2 {
		var next []string
		for _, q := range quoted {
			next = append(next, jsonBody(q, true), jsonBody(q, false), goBody(q))
		}
		quoted = next
		forms = append(forms, next...)
	}
	out := forms[:0]
	seen := map[string]bool{}
	for _, f := range forms {
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// jsonBody is s as encoding/json writes it inside a string, without the
// quotes.
func jsonBody(s string, escapeHTML bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(buf.String(), "\n")
	return strings.TrimSuffix(strings.TrimPrefix(out, `"`), `"`)
}

// goBody is s as strconv.Quote (and %q) writes it, without the quotes.
func goBody(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// String returns s with every registered form replaced by REDACTED.
func (r *Registry) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	r.mu.RLock()
	rep := r.replacer
	r.mu.RUnlock()
	if rep == nil {
		return s
	}
	return rep.Replace(s)
}

// generation changes whenever Add registers a new value.
func (r *Registry) generation() uint64 {
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gen
}

// Error returns err with its message redacted; err itself when the message
// holds no secret. Unwrap still reaches the original, so errors.Is/As and
// failure.IsPermanent classify it as before; only its text changes.
func (r *Registry) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := r.String(msg)
	if red == msg {
		return err
	}
	return &redactedError{err: err, msg: red}
}

type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
