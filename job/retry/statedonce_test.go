package retry_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/job/retry"
)

// The rule's numbers are stated once, in docs/RELIABILITY.md ("Retries"),
// from this package's constants; every doc, chart comment, schema
// description and --help line that repeats one is held to them here, so
// that a change of the rule fails until every repetition says the new
// number.

// ruleText finds the rule's numbers in prose: the fraction of the
// outage (a first contact), the multiple of it (a refresh), the floors
// max(N, …), the caps, and the arithmetic form failing time/N.
var (
	fractionRe = regexp.MustCompile(`(?i)\b(a half|a third|a quarter|a fifth|a sixth|an eighth|twice|three times|four times) (?:of )?(?:the |its )?(outage|time it has been failing|failing time|elapsed time|that time)`)
	floorRe    = regexp.MustCompile(`(?i)\bmax\((\d+) ?(min|h)\b`)
	capRe      = regexp.MustCompile(`(?i)\b(?:at most|capped at|cap of|longest gap \() ?(\d+) ?(h|hours)\b(?: (\d+) min)?`)
	divideRe   = regexp.MustCompile(`(?i)\b(?:failing time|outage|elapsed)\s*/\s*(\d+)`)
	contextRe  = regexp.MustCompile(`(?i)retr|attempt|failing|outage|refresh|propagat`)
	fractions  = map[string]int{"a half": 2, "a third": 3, "a quarter": 4, "a fifth": 5, "a sixth": 6, "an eighth": 8}
	multiples  = map[string]int{"twice": 2, "three times": 3, "four times": 4}
)

// ruleMismatches are the places in text (already joined into one line per
// paragraph) where a number of the rule differs from the constants, and
// how many places it checked.
func ruleMismatches(text string) (bad []string, checked int) {
	window := func(loc []int) string {
		return text[max(0, loc[0]-160):min(len(text), loc[1]+40)]
	}
	for _, loc := range fractionRe.FindAllStringSubmatchIndex(text, -1) {
		checked++
		word := strings.ToLower(text[loc[2]:loc[3]])
		if n, ok := fractions[word]; ok && n != retry.DefaultFraction {
			bad = append(bad, fmt.Sprintf("%q: the rule's fraction is 1/%d", text[loc[0]:loc[1]], retry.DefaultFraction))
		}
		if n, ok := multiples[word]; ok && n != retry.DefaultRefreshFactor {
			bad = append(bad, fmt.Sprintf("%q: a refresh's factor is %d", text[loc[0]:loc[1]], retry.DefaultRefreshFactor))
		}
	}
	for _, loc := range floorRe.FindAllStringSubmatchIndex(text, -1) {
		if !contextRe.MatchString(window(loc)) {
			continue
		}
		checked++
		n, _ := strconv.Atoi(text[loc[2]:loc[3]])
		d := time.Duration(n) * time.Minute
		if strings.EqualFold(text[loc[4]:loc[5]], "h") {
			d = time.Duration(n) * time.Hour
		}
		if d != retry.DefaultTick && d != retry.DefaultRefreshGap {
			bad = append(bad, fmt.Sprintf("%q: the floors are the interval (%s) and a refresh's least gap (%s)", text[loc[0]:loc[1]], retry.DefaultTick, retry.DefaultRefreshGap))
		}
	}
	caps := []time.Duration{retry.DefaultMaxGap, retry.DefaultRefreshMaxGap, retry.DefaultRefreshMaxGap + retry.DefaultTick, retry.MaxFirstContact}
	for _, loc := range capRe.FindAllStringSubmatchIndex(text, -1) {
		if !contextRe.MatchString(window(loc)) {
			continue
		}
		checked++
		h, _ := strconv.Atoi(text[loc[2]:loc[3]])
		d := time.Duration(h) * time.Hour
		if loc[6] >= 0 {
			m, _ := strconv.Atoi(text[loc[6]:loc[7]])
			d += time.Duration(m) * time.Minute
		}
		if !slices.Contains(caps, d) {
			bad = append(bad, fmt.Sprintf("%q: the rule's caps are %v", text[loc[0]:loc[1]], caps))
		}
	}
	for _, loc := range divideRe.FindAllStringSubmatchIndex(text, -1) {
		checked++
		if n, _ := strconv.Atoi(text[loc[2]:loc[3]]); n != retry.DefaultFraction {
			bad = append(bad, fmt.Sprintf("%q: the rule's fraction is 1/%d", text[loc[0]:loc[1]], retry.DefaultFraction))
		}
	}
	return bad, checked
}

// paragraphs joins a file's lines (a comment's # and a Go string's
// breaks included) so that a phrase broken over lines is read whole.
var lineBreak = regexp.MustCompile(`\s*\n\s*(?:#|//)?\s*`)

// TestTheRuleIsStatedOnce: the section that states the rule says each
// constant, and no doc, chart comment, schema description or --help line
// repeats a number of the rule that is not the rule's.
func TestTheRuleIsStatedOnce(t *testing.T) {
	root := filepath.Join("..", "..")
	files := []string{"README.md", "job/settings.go"}
	for _, dir := range []string{"docs", "manifests/chart/registration-engine", "manifests/marketplace", "manifests/base", "manifests/overlays"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch filepath.Ext(p) {
			case ".md", ".yaml", ".json", ".tpl", ".txt":
				rel, _ := filepath.Rel(root, p)
				if rel != filepath.Join("docs", "BENCHMARKS.md") { // fleetsim's and make bench's, held by their tests
					files = append(files, rel)
				}
			}
			return nil
		}))
	}
	places := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		text := lineBreak.ReplaceAllString(string(b), " ")
		bad, checked := ruleMismatches(text)
		places += checked
		for _, m := range bad {
			t.Errorf("%s: %s (the rule: docs/RELIABILITY.md, \"Retries\", and job/retry's constants)", f, m)
		}
	}

	doc, err := os.ReadFile(filepath.Join(root, "docs", "RELIABILITY.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "\n## Retries\n")
	require.True(t, ok, `docs/RELIABILITY.md has a "Retries" section`)
	section, _, _ = strings.Cut(section, "\n## ")
	for _, want := range []string{
		fmt.Sprintf("every %d min", int(retry.DefaultTick/time.Minute)),
		fmt.Sprintf("max(%d min, a quarter of the outage)", int(retry.DefaultTick/time.Minute)),
		fmt.Sprintf("at most %d h;", int(retry.DefaultMaxGap/time.Hour)),
		fmt.Sprintf("at least %d h, less the interval, at most %d h", int(retry.DefaultRefreshGap/time.Hour), int(retry.DefaultRefreshMaxGap/time.Hour)),
		fmt.Sprintf("max(%d h, twice the outage), at most %d h %d min", int(retry.DefaultRefreshGap/time.Hour), int(retry.DefaultRefreshMaxGap/time.Hour), int(retry.DefaultTick/time.Minute)),
		fmt.Sprintf("`PROPAGATION_WINDOW`: %d h, at most %d h", int(retry.DefaultFirstContact/time.Hour), int(retry.MaxFirstContact/time.Hour)),
	} {
		assert.Contains(t, section, want, `docs/RELIABILITY.md "Retries" states the rule from its constants`)
	}
	assert.Equal(t, 4, retry.DefaultFraction, `"a quarter" in the section and the table above`)
	assert.Equal(t, 2, retry.DefaultRefreshFactor, `"twice" in the section and the table above`)
	t.Logf("%d places in %d files repeat a number of the retry rule; each is the rule's", places, len(files))
}

// TestRuleMismatchesCatchesAStaleNumber: the check above finds a number
// left behind by a change of the rule, in each of the forms it reads.
func TestRuleMismatchesCatchesAStaleNumber(t *testing.T) {
	for _, stale := range []string{
		"registered within max(10 min, a third of the outage) after it ends",
		"a refresh is due after three times the time it has been failing",
		"the next attempt is due after failing time/8, capped at 6 h",
		"a retry's next attempt is due at most 9 h after the failure",
		"registered within max(20 min, a quarter of the outage)",
	} {
		bad, _ := ruleMismatches(stale)
		assert.NotEmpty(t, bad, "%q", stale)
	}
	good, checked := ruleMismatches("registered within max(10 min, a quarter of the outage), a refresh within max(1 h, twice the outage), at most 12 h 10 min; next attempt at most 6 h")
	assert.Empty(t, good)
	assert.Equal(t, 6, checked)
}
