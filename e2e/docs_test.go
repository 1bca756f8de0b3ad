package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReliabilityMatrixNamesRealTests keeps docs/RELIABILITY.md honest:
// every `package` `TestName/subtest` it cites must resolve to a test `go
// test` runs in that package, and the subtest to a name that test passes to
// t.Run, so a renamed or deleted test or table row cannot leave a row
// claiming a proof that no longer runs.
//
// It resolves names from the test files' syntax (as `go test -list` finds
// top-level tests, and as t.Run receives subtest names) instead of running
// each package's tests: compiling and running every cited package would make
// this check minutes long, and a subtest's name is fixed by the source.
func TestReliabilityMatrixNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile("../docs/RELIABILITY.md")
	require.NoError(t, err)
	refs := regexp.MustCompile("`([a-z0-9/]+)` `(Test[A-Za-z0-9_]+)(?:/([^`]+))?`").FindAllStringSubmatch(string(doc), -1)
	require.Greater(t, len(refs), 50, "the matrix cites its tests")

	pkgs := map[string]*testPackage{}
	for _, ref := range refs {
		pkg, test, sub := ref[1], ref[2], ref[3]
		p, ok := pkgs[pkg]
		if !ok {
			p = parseTestPackage(t, filepath.Join("..", pkg))
			pkgs[pkg] = p
		}
		if !assert.Contains(t, p.tests, test, "docs/RELIABILITY.md cites %s %s, which go test does not run there", pkg, test) {
			continue
		}
		if sub == "" {
			continue
		}
		names := p.subtests(test)
		for _, part := range strings.Split(sub, "/") {
			assert.Contains(t, names, part, "docs/RELIABILITY.md cites subtest %s/%s in %s, which %s never runs", test, sub, pkg, test)
		}
	}
}

// testPackage is one package's test files as syntax: its top-level tests
// and every function, to follow the calls a test makes.
type testPackage struct {
	tests map[string]bool          // func TestXxx(t *testing.T)
	funcs map[string]*ast.FuncDecl // by name (methods by method name)
	vars  map[string]ast.Expr      // package-level var and const values
}

func parseTestPackage(t *testing.T, dir string) *testPackage {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no test files in %s", dir)
	p := &testPackage{tests: map[string]bool{}, funcs: map[string]*ast.FuncDecl{}, vars: map[string]ast.Expr{}}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				p.funcs[d.Name.Name] = d
				if d.Recv == nil && isTestFunc(d) {
					p.tests[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if v, ok := s.(*ast.ValueSpec); ok {
						for i, n := range v.Names {
							if i < len(v.Values) {
								p.vars[n.Name] = v.Values[i]
							}
						}
					}
				}
			}
		}
	}
	return p
}

// isTestFunc is go test's rule: TestXxx (Xxx not starting lower case) with
// one *testing.T parameter and no result.
func isTestFunc(d *ast.FuncDecl) bool {
	name := d.Name.Name
	if !strings.HasPrefix(name, "Test") || (len(name) > 4 && strings.ToLower(name[4:5]) == name[4:5] && strings.ToUpper(name[4:5]) != name[4:5]) {
		return false
	}
	params := d.Type.Params.List
	if len(params) != 1 || len(params[0].Names) > 1 || d.Type.Results != nil {
		return false
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T" && isIdent(sel.X, "testing")
}

// subtests are the names test can pass to t.Run: string literals given to
// Run directly, and the keys of the map[string]… tables it ranges over,
// declared in the test or at package level. Functions and methods of the
// package that the test calls are followed, so a subtest run by a helper
// counts.
func (p *testPackage) subtests(test string) map[string]bool {
	names := map[string]bool{}
	seen := map[string]bool{}
	var visit func(fn *ast.FuncDecl)
	visit = func(fn *ast.FuncDecl) {
		if fn == nil || fn.Body == nil || seen[fn.Name.Name] {
			return
		}
		seen[fn.Name.Name] = true
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				switch f := n.Fun.(type) {
				case *ast.SelectorExpr:
					if f.Sel.Name == "Run" && len(n.Args) == 2 {
						if s, ok := stringLit(n.Args[0]); ok {
							names[s] = true
						}
					}
					visit(p.funcs[f.Sel.Name])
				case *ast.Ident:
					visit(p.funcs[f.Name])
				}
			case *ast.CompositeLit:
				addMapKeys(names, n)
			case *ast.RangeStmt:
				if id, ok := n.X.(*ast.Ident); ok {
					if lit, ok := p.vars[id.Name].(*ast.CompositeLit); ok {
						addMapKeys(names, lit)
					}
				}
			}
			return true
		})
	}
	visit(p.funcs[test])
	return names
}

// addMapKeys adds the string keys of a map[string]… literal.
func addMapKeys(names map[string]bool, lit *ast.CompositeLit) {
	if m, ok := lit.Type.(*ast.MapType); !ok || !isIdent(m.Key, "string") {
		return
	}
	for _, e := range lit.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			if s, ok := stringLit(kv.Key); ok {
				names[s] = true
			}
		}
	}
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// The resolver must refuse what the old substring check let through: a
// subtest name that appears in the package's tests, but not as a subtest of
// the cited test.
func TestReliabilityResolverRefusesNearMisses(t *testing.T) {
	p := parseTestPackage(t, filepath.Join("..", "job", "smt"))
	require.True(t, p.tests["TestFind"])
	assert.True(t, p.subtests("TestFind")["garbage XML: next region server"])
	assert.False(t, p.tests["TestFin"], "a prefix of a test is no test")
	assert.False(t, p.subtests("TestFindBodyLimit")["garbage XML: next region server"], "a row of TestFind is not a subtest of TestFindBodyLimit")
	assert.False(t, p.tests["FuzzParseMetadata"], "a fuzz target is not a test")
}
