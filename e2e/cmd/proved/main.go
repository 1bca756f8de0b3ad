// Command proved lists, from the sources alone, the "proved:" lines a go
// test invocation would log: for each package directory, the top-level
// tests that -run and -skip select (as go test applies them to top-level
// names), and every t.Logf("proved: …") in the functions and methods those
// tests reach by name within their package. `make proved` runs it for each
// target .ci/run runs, so a change to the Makefile's test lists can be
// checked to keep every proof somewhere (docs/development.md).
//
//	proved [-label L] [-run RE] [-skip RE] [-tags a,b] DIR...
//
// Each line is tab-separated: label, directory, test, the format string.
// A proved: line no selected test reaches is not printed; with -unreached,
// those of the directories given are printed on standard error, so a helper
// that proves something but that no test of its own package calls is seen.
//
// Reachability is by name, not by type: a method name reached from a test
// counts for every method of that name in the package (local variables
// excepted). That can only list more, never fewer, of the lines a run logs.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	label := flag.String("label", "", "first column of every line (e.g. the make target and Kubernetes version)")
	run := flag.String("run", "", "go test -run: the top-level tests to select (empty: all)")
	skip := flag.String("skip", "", "go test -skip: the top-level tests to leave out")
	tags := flag.String("tags", "", "build tags, comma-separated, as go test -tags")
	unreached := flag.Bool("unreached", false, "also report, on stderr, proved: lines no test of their package reaches")
	flag.Parse()
	if err := list(os.Stdout, *label, *run, *skip, *tags, *unreached, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "proved:", err)
		os.Exit(1)
	}
}

func list(w *os.File, label, run, skip, tags string, unreached bool, dirs []string) error {
	runRE, err := regexp.Compile(run)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	var skipRE *regexp.Regexp
	if skip != "" {
		if skipRE, err = regexp.Compile(skip); err != nil {
			return fmt.Errorf("-skip: %w", err)
		}
	}
	ctx := build.Default
	if tags != "" {
		ctx.BuildTags = strings.Split(tags, ",")
	}
	var out []string
	for _, dir := range dirs {
		pkg, err := parseDir(&ctx, dir)
		if err != nil {
			return err
		}
		reached := map[string]bool{}
		for _, test := range pkg.tests {
			if !runRE.MatchString(test) || (skipRE != nil && skipRE.MatchString(test)) {
				continue
			}
			for _, fn := range pkg.reach(test) {
				reached[fn] = true
				for _, p := range pkg.proved[fn] {
					out = append(out, strings.Join([]string{label, dir, test, p.format}, "\t"))
				}
			}
		}
		if unreached {
			all := map[string]bool{}
			for _, test := range pkg.tests {
				for _, fn := range pkg.reach(test) {
					all[fn] = true
				}
			}
			for fn, ps := range pkg.proved {
				if !all[fn] {
					for _, p := range ps {
						fmt.Fprintf(os.Stderr, "unreached: %s %s: %s\n", p.pos, fn, p.format)
					}
				}
			}
		}
	}
	sort.Strings(out)
	for _, l := range out {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

type provedLine struct {
	pos    string
	format string
}

type pkg struct {
	tests  []string                // top-level test functions, in name order
	refs   map[string][]string     // by function or method name: the names its body uses
	proved map[string][]provedLine // by function or method name: its proved: lines
}

func parseDir(ctx *build.Context, dir string) (*pkg, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &pkg{refs: map[string][]string{}, proved: map[string][]provedLine{}}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			continue
		}
		if ok, err := ctx.MatchFile(dir, name); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(f.Name.Name, "_test") && !strings.HasSuffix(name, "_test.go") {
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn := fd.Name.Name
			if fd.Recv == nil && strings.HasPrefix(fn, "Test") && fn != "TestMain" && strings.HasSuffix(name, "_test.go") {
				p.tests = append(p.tests, fn)
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Ident:
					// A local variable (say run := …) names no function.
					if n.Obj == nil || n.Obj.Kind == ast.Fun {
						p.refs[fn] = append(p.refs[fn], n.Name)
					}
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok || (sel.Sel.Name != "Logf" && sel.Sel.Name != "Log") || len(n.Args) == 0 {
						break
					}
					lit, ok := n.Args[0].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						break
					}
					s, err := strconv.Unquote(lit.Value)
					if err == nil && strings.HasPrefix(s, "proved:") {
						p.proved[fn] = append(p.proved[fn], provedLine{pos: fset.Position(lit.Pos()).String(), format: s})
					}
				}
				return true
			})
		}
	}
	sort.Strings(p.tests)
	return p, nil
}

// reach is every function or method of the package test reaches by name,
// test included, other top-level tests excluded.
func (p *pkg) reach(test string) []string {
	seen := map[string]bool{test: true}
	queue := []string{test}
	for len(queue) > 0 {
		fn := queue[0]
		queue = queue[1:]
		for _, r := range p.refs[fn] {
			if seen[r] || strings.HasPrefix(r, "Test") {
				continue
			}
			if _, ok := p.refs[r]; !ok {
				continue
			}
			seen[r] = true
			queue = append(queue, r)
		}
	}
	out := make([]string, 0, len(seen))
	for fn := range seen {
		out = append(out, fn)
	}
	sort.Strings(out)
	return out
}
