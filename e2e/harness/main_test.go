package harness_test

import (
	"os"
	"testing"

	"github.com/rancher/registration-engine/e2e/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
