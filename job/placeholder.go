package job

import (
	"errors"
	"fmt"
	"strings"
)

// Placeholder is the literal an Azure Marketplace bundle ships for the
// values Azure fills in when it deploys the chart (global.azure.* in
// manifests/marketplace/values.yaml). A setting that still holds it came
// from a chart rendered outside Azure; taken at face value it would send
// "DONOTMODIFY" to ARM as a resource ID, a plan or a client ID.
const Placeholder = "DONOTMODIFY"

// ErrNotRendered marks a setting that holds Placeholder (permanent, like
// every configuration problem).
var ErrNotRendered = errors.New("the chart was rendered outside Azure")

// isPlaceholder reports whether v is the Marketplace placeholder.
func isPlaceholder(v string) bool { return strings.TrimSpace(v) == Placeholder }

// placeholderProblem names the setting (the flag or variable it came from)
// and says why it counts as missing.
func placeholderProblem(from string) error {
	return fmt.Errorf("%s=%q: %w: Azure fills this value in when it deploys the Marketplace bundle, so it counts as missing; "+
		"install through the Azure Marketplace, or set the value", from, Placeholder, ErrNotRendered)
}
