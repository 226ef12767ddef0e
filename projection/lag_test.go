package projection_test

import (
	"context"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/projection"
)

// TestLagTime: a runner behind the head reports how long ago the first
// event it has not handled was appended; once live, no lag.
func TestLagTime(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store, base projection.Config) {
		appendN(t, s, "acct", "Deposited", 20, 2)
		// $all shows them all before the runner starts (PostgreSQL's
		// horizon lags behind the writers of the tests beside this one).
		if last, err := s.LastPosition(t.Context()); err != nil {
			t.Fatal(err)
		} else if err := s.WaitFor(t.Context(), last); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the events' age; nothing asserts a duration
		release := make(chan struct{})
		r, err := projection.NewRunner(s, projection.Projection{Name: "lagging", Version: 1,
			Handle: func(ctx context.Context, b projection.Batch) error {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			}}, with(base, projection.Config{PageSize: 5, MinPoll: time.Millisecond, MaxPoll: 10 * time.Millisecond, ControlPoll: -1}))
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, r)
		// While the first batch is held, the runner has looked at the head
		// and at the first event it has not handled.
		waitFor(t, "a lag time of at least the events' age", func() bool { return r.Status().LagTime >= 20*time.Millisecond })
		close(release)
		<-r.Live()
		if st := r.Status(); st.LagTime != 0 {
			t.Errorf("lag time once live: %v", st.LagTime)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}
