package pkg

import "testing"

type env struct{}

func TestFast(t *testing.T) {
	e := env{}
	t.Run("by method value", e.caseA)
	helper(t)
}

func TestLong(t *testing.T) {
	run := 1 // a local variable named like a method proves nothing
	_ = run
	t.Logf("proved: long %d", 1)
}

func TestQuiet(t *testing.T) {}

func (env) caseA(t *testing.T) { t.Logf("proved: by method value") }

func (env) run(t *testing.T) { t.Logf("proved: only through a method named run") }

func helper(t *testing.T) { t.Logf("proved: through a helper %s", "x") }

func unused(t *testing.T) { t.Log("proved: nobody calls this") }
