package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	e := Exponential{Initial: 100 * time.Millisecond, Max: time.Second}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		if got := e.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	e.Jitter = 0.5
	for range 1000 {
		if d := e.Delay(3); d <= 200*time.Millisecond || d > 400*time.Millisecond {
			t.Fatalf("Delay(3) with jitter 0.5 = %v, want (200ms, 400ms]", d)
		}
	}
	full := Exponential{Initial: time.Millisecond, Max: time.Millisecond, Jitter: 1}
	for range 1000 {
		if d := full.Delay(1); d <= 0 || d > time.Millisecond {
			t.Fatalf("full jitter gave %v", d)
		}
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Microsecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep with an ended context: %v", err)
	}
}
