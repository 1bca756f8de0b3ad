package job

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// ErrRegCode marks a registration code refused at load: blank, with white
// space or a control character inside, or a placeholder (permanent, like
// every configuration problem). Taken as it is, the operator would send it
// to SUSE Customer Center, which answers 401, and the cluster would look
// registered to everyone but SCC.
var ErrRegCode = errors.New("not a registration code")

// regCodePlaceholders are texts people and templates leave where a code
// belongs, compared case-insensitively with the whole trimmed value (the
// Marketplace's DONOTMODIFY is refused before, as every setting's).
var regCodePlaceholders = []string{
	"changeme", "change-me", "change_me", "todo", "tbd", "none", "null", "nil", "undefined",
	"regcode", "reg-code", "registrationcode", "registration-code", "registration_code",
	"your-registration-code", "your-code", "code", "example", "...", "…",
}

// regCode is the registration code as a run sends it: v without the white
// space around it (a code pasted with a newline or copied with a space
// reaches the operator as it is, and SCC refuses it). A code that is blank
// after trimming, has white space or a control character inside, or is a
// placeholder (REPLACE-ME…, <…>, ${…}, {{…}}, all x, regCodePlaceholders)
// is an error wrapping ErrRegCode that never quotes the value.
func regCode(v string) (string, error) {
	code := strings.TrimSpace(v)
	if code == "" {
		return "", fmt.Errorf("%w: blank (only white space); unset it while you have no code, or set the code", ErrRegCode)
	}
	for i, r := range code {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return "", fmt.Errorf("%w: white space or a control character at byte %d of %d; set the code alone, as SUSE Customer Center shows it", ErrRegCode, i, len(code))
		}
	}
	if isRegCodePlaceholder(code) {
		return "", fmt.Errorf("%w: a placeholder, not a code; set the code SUSE Customer Center shows for the subscription", ErrRegCode)
	}
	return code, nil
}

// isRegCodePlaceholder: code (trimmed) is a placeholder text.
func isRegCodePlaceholder(code string) bool {
	l := strings.ToLower(code)
	for _, p := range [][2]string{{"<", ">"}, {"${", "}"}, {"{{", "}}"}, {"%", "%"}, {"@", "@"}} {
		if len(l) > len(p[0])+len(p[1])-1 && strings.HasPrefix(l, p[0]) && strings.HasSuffix(l, p[1]) {
			return true
		}
	}
	return strings.HasPrefix(l, "replace-me") || strings.HasPrefix(l, "replace_me") || strings.HasPrefix(l, "replaceme") ||
		strings.Trim(l, "x-") == "" || containsFold(regCodePlaceholders, l)
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(e string) bool { return strings.EqualFold(e, s) })
}
