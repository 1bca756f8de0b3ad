package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocLinksResolve: every relative link in the project's Markdown names a
// file that exists and, with a #fragment, a heading of that file, as GitHub
// renders them. A page moved or a section renamed breaks the reader's path
// here, not in front of a customer.
func TestDocLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	var pages []string
	require.NoError(t, filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "_out" || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return nil
	}))
	require.NotEmpty(t, pages)
	anchors := map[string]map[string]bool{}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(withoutCode(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s links to %s: no such file", page, target)
				continue
			}
			checked++
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if anchors[dest] == nil {
				anchors[dest] = headingAnchors(t, dest)
			}
			assert.True(t, anchors[dest][frag], "%s links to %s: %s has no heading with the anchor #%s", page, target, dest, frag)
		}
	}
	assert.Greater(t, checked, 30, "the links were found")
}

// withoutCode drops fenced code blocks, whose brackets are not links.
func withoutCode(s string) string {
	var out []string
	in := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// headingAnchors: the anchors GitHub gives a page's headings (lower case,
// punctuation but hyphens dropped, spaces as hyphens, repeats numbered).
func headingAnchors(t *testing.T, path string) map[string]bool {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	seen := map[string]int{}
	anchors := map[string]bool{}
	for _, line := range strings.Split(withoutCode(string(b)), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}
