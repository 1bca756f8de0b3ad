package job

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/job/operator"
)

// secretManifest renders data as a v1 Secret manifest that `kubectl apply -f`
// accepts.
func secretManifest(namespace, name string, data map[string]string) ([]byte, error) {
	return yaml.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata":   map[string]string{"name": name, "namespace": namespace},
		"type":       "Opaque",
		"stringData": data,
	})
}

// PrintStore is the dry run's storage: it prints the Secret it would write,
// with the registration code and the instance data redacted, and writes
// nothing anywhere.
type PrintStore struct {
	W               io.Writer
	Namespace, Name string
}

// Check has nothing to check: a dry run writes nowhere.
func (PrintStore) Check(context.Context, operator.Values) error { return nil }

// Write prints r and reports it as changed (nothing was compared).
func (p PrintStore) Write(_ context.Context, r operator.Values) (bool, error) {
	out, err := secretManifest(p.Namespace, p.Name, r.Redacted())
	if err != nil {
		return false, err
	}
	_, err = fmt.Fprintf(p.W, "# dry run: the Secret this run would write (secret values redacted)\n%s", out)
	return true, err
}

// FileStore writes the complete Secret manifest, secrets included, to a file
// with mode 0600, for a run outside any cluster. The file is replaced
// atomically: a reader sees the old manifest or the new one, never half.
type FileStore struct {
	Path            string
	Namespace, Name string
}

// Check has nothing to check: the file is written whatever r holds.
func (FileStore) Check(context.Context, operator.Values) error { return nil }

// Write writes r to the file; changed is false when the file already holds
// exactly this manifest.
func (f FileStore) Write(_ context.Context, r operator.Values) (bool, error) {
	out, err := secretManifest(f.Namespace, f.Name, r.Data())
	if err != nil {
		return false, err
	}
	if old, err := os.ReadFile(f.Path); err == nil && string(old) == string(out) {
		return false, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), ".registration-*.yaml")
	if err != nil {
		return false, fmt.Errorf("output: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return false, fmt.Errorf("output: %w", err)
	}
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return false, fmt.Errorf("output: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("output: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return false, fmt.Errorf("output: %w", err)
	}
	return true, nil
}
