package main

import (
	"context"
	"testing"
	"time"
)

func TestAlignStart(t *testing.T) {
	t.Parallel()
	sec := func(s, ms int64) time.Time { return time.Unix(s, ms*int64(time.Millisecond)) }
	tests := []struct {
		name   string
		now    time.Time
		first  time.Duration
		lead   time.Duration
		window time.Duration
		want   time.Time
	}{
		{"t0 in the past, first request still ahead", sec(100, 300), 700 * time.Millisecond, 50 * time.Millisecond, time.Second, sec(100, 0)},
		{"first request too close: next second", sec(100, 680), 700 * time.Millisecond, 50 * time.Millisecond, time.Second, sec(101, 0)},
		{"exactly on a boundary", sec(100, 650), 700 * time.Millisecond, 50 * time.Millisecond, time.Second, sec(100, 0)},
		{"first at zero", sec(100, 1), 0, 0, time.Second, sec(101, 0)},
		{"first at zero, on a boundary", sec(100, 0), 0, 0, time.Second, sec(100, 0)},
		{"small window", sec(100, 12), 0, 0, 50 * time.Millisecond, sec(100, 50)},
		{"zero window means one second", sec(100, 500), 0, 0, 0, sec(101, 0)},
		{"minute window counts from the epoch", sec(61, 0), 0, 0, time.Minute, sec(120, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := alignStart(tt.now, tt.first, tt.lead, tt.window)
			if !got.Equal(tt.want) {
				t.Errorf("alignStart: got %v, want %v", got.UnixNano(), tt.want.UnixNano())
			}
		})
	}
}

func TestAlignStartKeepsMonotonic(t *testing.T) {
	t.Parallel()
	now := time.Now()
	t0 := alignStart(now, 700*time.Millisecond, 50*time.Millisecond, time.Second)
	if t0.UnixNano()%int64(time.Second) != 0 {
		t.Errorf("t0 = %d ns since the epoch, want a whole second", t0.UnixNano())
	}
	// Round(0) strips the monotonic reading; a result that has one prints
	// differently from its stripped copy.
	if t0.String() == t0.Round(0).String() {
		t.Errorf("t0 %v has no monotonic clock reading", t0)
	}
	if first := t0.Add(700 * time.Millisecond); first.Sub(now) < 50*time.Millisecond {
		t.Errorf("first request %v after now, want at least the 50ms lead", first.Sub(now))
	}
}

func TestTraceOffsets(t *testing.T) {
	t.Parallel()
	at := []float64{0.7, 1.1, 1.15, 2.87}
	tests := []struct {
		name    string
		stagger time.Duration
		want    []time.Duration
	}{
		{"exact", 0, []time.Duration{700 * time.Millisecond, 1100 * time.Millisecond, 1150 * time.Millisecond, 2870 * time.Millisecond}},
		{"staggered", 250 * time.Microsecond, []time.Duration{
			700 * time.Millisecond,
			1100*time.Millisecond + 250*time.Microsecond,
			1150*time.Millisecond + 500*time.Microsecond,
			2870*time.Millisecond + 750*time.Microsecond,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := traceOffsets(at, tt.stagger)
			for i := range tt.want {
				if got[i] != tt.want[i] {
					t.Errorf("offset %d (t=%v): got %v, want %v", i, at[i], got[i], tt.want[i])
				}
			}
		})
	}
}

func TestWaitUntilNeverEarly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, d := range []time.Duration{-time.Millisecond, 0, 100 * time.Microsecond, 3 * time.Millisecond} {
		deadline := time.Now().Add(d)
		if err := waitUntil(ctx, deadline); err != nil {
			t.Fatalf("waitUntil(+%v): %v", d, err)
		}
		if now := time.Now(); now.Before(deadline) {
			t.Errorf("waitUntil(+%v) returned %v early", d, deadline.Sub(now))
		}
	}
}

func TestWaitUntilCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitUntil(ctx, time.Now().Add(time.Hour)); err != context.Canceled {
		t.Errorf("waitUntil on a cancelled context: got %v, want context.Canceled", err)
	}
}
