package main

import (
	"cmp"
	"compress/gzip"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// sizes are the artefacts' sizes in bytes.
type sizes struct {
	binary, binaryGzip int64
	binaryErr          error
	image              int64
	imageNote          string
	// parts is where the code and data of the unstripped build come from,
	// largest first; partsErr says why there is no breakdown.
	parts    []part
	partsErr error
	// apiPackages is how many k8s.io/api packages are linked in.
	apiPackages int
}

// part is the bytes of symbols of one origin.
type part struct {
	origin string
	bytes  int64
}

// origins group package paths by where they come from, first match wins.
var origins = []struct{ name, prefix string }{
	{"Kubernetes API types (k8s.io/api)", "k8s.io/api/"},
	{"Kubernetes client (k8s.io/client-go)", "k8s.io/client-go/"},
	{"Kubernetes machinery (k8s.io/apimachinery, sigs.k8s.io, k8s.io/kube-openapi, k8s.io/klog, k8s.io/utils)", "k8s.io/"},
	{"Kubernetes machinery (k8s.io/apimachinery, sigs.k8s.io, k8s.io/kube-openapi, k8s.io/klog, k8s.io/utils)", "sigs.k8s.io/"},
	{"OpenAPI models (github.com/google/gnostic-models)", "github.com/google/gnostic-models/"},
	{"protobuf (google.golang.org/protobuf, gogo, golang/protobuf)", "google.golang.org/protobuf/"},
	{"protobuf (google.golang.org/protobuf, gogo, golang/protobuf)", "github.com/gogo/protobuf/"},
	{"protobuf (google.golang.org/protobuf, gogo, golang/protobuf)", "github.com/golang/protobuf/"},
	{"Azure SDK and MSAL", "github.com/Azure/"},
	{"Azure SDK and MSAL", "github.com/AzureAD/"},
	{"registration-engine itself", "github.com/rancher/registration-engine"},
	{"registration-engine itself", "main"},
}

// composition attributes the symbols of an unstripped ELF build to their
// origin. Only symbols in sections stored in the file count (.bss does
// not); the tables the linker writes (.gopclntab, .typelink, …) have no
// symbols of their own and grow with the code they describe.
func composition(path string) (_ []part, apiPackages int, _ error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = f.Close() }()
	syms, err := f.Symbols()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	by := map[string]int64{}
	api := map[string]bool{}
	others := map[string]int64{}
	for _, sym := range syms {
		if sym.Section >= elf.SectionIndex(len(f.Sections)) || sym.Size == 0 || f.Sections[sym.Section].Type == elf.SHT_NOBITS {
			continue
		}
		pkg := symbolPackage(sym.Name)
		o := origin(pkg)
		by[o] += int64(sym.Size)
		if o == otherModules {
			others[pkg] += int64(sym.Size)
		}
		if strings.HasPrefix(pkg, "k8s.io/api/") {
			api[pkg] = true
		}
	}
	var out []part
	for o, n := range by {
		if o == otherModules {
			o += " (largest: " + strings.Join(largest(others, 4), ", ") + ")"
		}
		out = append(out, part{o, n})
	}
	slices.SortFunc(out, func(a, b part) int { return cmp.Compare(b.bytes, a.bytes) })
	return out, len(api), nil
}

// symbolPackage is the package path of a Go symbol name
// ("k8s.io/api/core/v1.(*Pod).Marshal", "type:*k8s.io/api/core/v1.Pod",
// "go:itab.*k8s.io/api/apps/v1.ReplicaSet,k8s.io/apimachinery/pkg/runtime.Object").
func symbolPackage(sym string) string {
	name := sym
	for {
		trimmed := strings.TrimLeft(name, "*")
		for _, prefix := range []string{"type:", "go:itab.", "go:", ".eq."} {
			trimmed = strings.TrimPrefix(trimmed, prefix)
		}
		if trimmed == name {
			break
		}
		name = trimmed
	}
	if i := strings.IndexAny(name, "[(,"); i >= 0 {
		name = name[:i]
	}
	slash := strings.LastIndex(name, "/")
	if dot := strings.Index(name[slash+1:], "."); dot >= 0 {
		name = name[:slash+1+dot]
	}
	// The linker escapes dots in the last element (gopkg.in/yaml%2ev3).
	return strings.ReplaceAll(name, "%2e", ".")
}

// origin names where a package comes from.
func origin(pkg string) string {
	for _, o := range origins {
		if pkg == o.prefix || strings.HasPrefix(pkg, o.prefix) {
			return o.name
		}
	}
	first := pkg
	if i := strings.Index(pkg, "/"); i >= 0 {
		first = pkg[:i]
	}
	if !strings.Contains(first, ".") && first != "" {
		return "Go standard library and runtime"
	}
	return otherModules
}

const otherModules = "other modules"

// largest returns the n keys of m with the largest values.
func largest(m map[string]int64, n int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	return keys[:min(n, len(keys))]
}

func measureSizes(o options) sizes {
	s := sizes{image: o.imageBytes, imageNote: o.imageNote}
	if o.stripped == "" {
		s.binaryErr = fmt.Errorf("no stripped binary given")
		return s
	}
	fi, err := os.Stat(o.stripped)
	if err != nil {
		s.binaryErr = err
		return s
	}
	s.binary = fi.Size()
	if o.unstripped == "" {
		s.partsErr = fmt.Errorf("no unstripped build given")
	} else {
		s.parts, s.apiPackages, s.partsErr = composition(o.unstripped)
	}
	// A registry stores and a node pulls the layer gzip-compressed, so the
	// gzip size of the binary is what its layer costs over the wire.
	s.binaryGzip, err = gzipSize(o.stripped)
	if err != nil {
		s.binaryErr = err
	}
	return s
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func gzipSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	var cw countingWriter
	zw := gzip.NewWriter(&cw)
	if _, err := io.Copy(zw, f); err != nil {
		return 0, fmt.Errorf("gzip %s: %w", path, err)
	}
	if err := zw.Close(); err != nil {
		return 0, fmt.Errorf("gzip %s: %w", path, err)
	}
	return cw.n, nil
}
