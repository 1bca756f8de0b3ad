//go:build e2e

package pkg

import "testing"

func TestTagged(t *testing.T) { t.Logf("proved: only with -tags e2e") }
