package pause_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rancher/registration-engine/internal/pause"
)

func TestFor(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := map[string]struct {
		ctx  context.Context
		d    time.Duration
		want error
	}{
		"a full wait":                           {ctx: context.Background(), d: time.Millisecond},
		"no wait":                               {ctx: context.Background(), d: 0},
		"a cancelled run does not wait":         {ctx: cancelled, d: time.Hour, want: context.Canceled},
		"a cancelled run ends even a zero wait": {ctx: cancelled, d: 0, want: context.Canceled},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, pause.For(tc.ctx, tc.d), tc.want)
		})
	}
}

// A run stopped while waiting returns at once, not after the wait.
func TestForStopsWhenTheRunEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pause.For(ctx, time.Hour) }()
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}
