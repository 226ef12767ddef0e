package varve_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

// rot13 opens events whose data begins with "sealed:" by taking the prefix
// off; it fails when failing is set.
type rot13 struct{ failing bool }

var errOpener = errors.New("opener out of reach")

func (o *rot13) OpenEvents(_ context.Context, evs []varve.RecordedEvent) error {
	if o.failing {
		return errOpener
	}
	for i := range evs {
		if d, ok := bytes.CutPrefix(evs[i].Data, []byte("sealed:")); ok {
			evs[i].Data = d
		}
	}
	return nil
}

// TestOpener: every read opens its pages with the store's Opener, except a
// Sealed one, and an opener's error fails the read.
func TestOpener(t *testing.T) {
	ctx := context.Background()
	op := &rot13{}
	s := newStore(t, memory.New(), varve.Config{Opener: op})
	ev := varve.Event{ID: varve.NewEventID(), Type: "t", Data: []byte("sealed:x"), Tags: []string{"k"}}
	if _, err := s.Append(ctx, "a-1", varve.NoStream, ev, varve.NewEvent("t", []byte("plain"))); err != nil {
		t.Fatal(err)
	}
	collect := func(seq func(func(varve.RecordedEvent, error) bool)) (string, error) {
		var out []string
		var err error
		seq(func(e varve.RecordedEvent, e2 error) bool {
			if e2 != nil {
				err = e2
				return false
			}
			out = append(out, string(e.Data))
			return true
		})
		if len(out) == 0 {
			return "", err
		}
		return out[0], err
	}
	page := func(opts ...varve.AllOption) (string, error) {
		p, err := s.ReadAllPage(ctx, varve.Start, nil, opts...)
		if err != nil || len(p.Events) == 0 {
			return "", err
		}
		return string(p.Events[0].Data), nil
	}
	qpage := func(opts ...varve.AllOption) (string, error) {
		p, err := s.ReadQueryPage(ctx, varve.Query{Items: []varve.QueryItem{{Tags: []string{"k"}}}}, varve.Start, nil, opts...)
		if err != nil || len(p.Events) == 0 {
			return "", err
		}
		return string(p.Events[0].Data), nil
	}
	q := varve.Query{Items: []varve.QueryItem{{Tags: []string{"k"}}}}
	reads := []struct {
		name string
		read func(sealed bool) (string, error)
	}{
		{"stream", func(sealed bool) (string, error) {
			if sealed {
				return collect(s.ReadStream(ctx, "a-1", varve.Sealed()))
			}
			return collect(s.ReadStream(ctx, "a-1"))
		}},
		{"$all", func(sealed bool) (string, error) {
			if sealed {
				return collect(s.ReadAll(ctx, varve.Start, varve.Sealed()))
			}
			return collect(s.ReadAll(ctx, varve.Start))
		}},
		{"$all filtered", func(sealed bool) (string, error) {
			f := varve.Filter{Categories: []string{"a"}}
			if sealed {
				return collect(s.ReadAll(ctx, varve.Start, f, varve.Sealed()))
			}
			return collect(s.ReadAll(ctx, varve.Start, f))
		}},
		{"$all page", func(sealed bool) (string, error) {
			if sealed {
				return page(varve.Sealed())
			}
			return page()
		}},
		{"$all page filtered", func(sealed bool) (string, error) {
			f := varve.Filter{Types: []string{"t"}}
			if sealed {
				return page(f, varve.Sealed())
			}
			return page(f)
		}},
		{"query", func(sealed bool) (string, error) {
			if sealed {
				return collect(s.ReadQuery(ctx, q, varve.Start, varve.Sealed()))
			}
			return collect(s.ReadQuery(ctx, q, varve.Start))
		}},
		{"query page", func(sealed bool) (string, error) {
			if sealed {
				return qpage(varve.Sealed())
			}
			return qpage()
		}},
	}
	for _, r := range reads {
		t.Run(r.name, func(t *testing.T) {
			op.failing = false
			if got, err := r.read(false); err != nil || got != "x" {
				t.Fatalf("opened read: %q %v", got, err)
			}
			if got, err := r.read(true); err != nil || got != "sealed:x" {
				t.Fatalf("sealed read: %q %v", got, err)
			}
			op.failing = true
			if _, err := r.read(false); !errors.Is(err, errOpener) {
				t.Fatalf("a failing opener: %v", err)
			}
			if got, err := r.read(true); err != nil || got != "sealed:x" {
				t.Fatalf("a sealed read does not call the opener: %q %v", got, err)
			}
		})
	}
	op.failing = false
	evs := []varve.RecordedEvent{{Data: []byte("sealed:y")}}
	if err := s.Open(ctx, evs); err != nil || string(evs[0].Data) != "y" {
		t.Fatalf("Store.Open: %q %v", evs[0].Data, err)
	}
}
