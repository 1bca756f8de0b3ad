package controlplane_test

import (
	"os"
	"testing"

	"github.com/rancher/registration-engine/e2e/controlplane"
)

func TestMain(m *testing.M) { os.Exit(controlplane.Main(m)) }
