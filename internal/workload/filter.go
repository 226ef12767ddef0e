package workload

import (
	"context"
	"fmt"
	"strings"

	"github.com/varve-go/varve"
)

// filterLog is the length of the log the filter workloads of the suite
// read; hot events are one in filterEvery of it.
const (
	filterLog   = 20_000
	filterEvery = 100
)

// filterWorkloads are the catch-ups of a sparse reader: a category that is
// 1% of a log, read with the backend's filter and by filtering every page
// in the client (the way subscriptions read before filters were pushed
// down), the stream that holds the same events, and an unfiltered read of
// $all of as many events, the yardstick of a filtered read's speed.
func filterWorkloads(scale bool) []Workload {
	pre, bench, size := "filter-", "Filter/", "20,000"
	if scale {
		pre, bench, size = "scale-filter-", "ScaleFilter/", "the budget's"
	}
	mk := func(name, b, about string, read func(ctx context.Context, s *varve.Store, l *hotLog) (int, error)) Workload {
		return Workload{
			Name: pre + name, Bench: bench + b, About: about + " (1% of a log of " + size + " events)",
			Workers: 1, Unit: Events, Scale: scale,
			Setup: func(ctx context.Context, s *varve.Store, p Params) (Prepared, error) {
				n := filterLog
				if scale {
					n = max(p.Events, filterEvery)
				}
				l, err := writeHotLog(ctx, s, p.Prefix, n)
				if err != nil {
					return Prepared{}, err
				}
				return Prepared{PerOp: l.hot, NewOp: func(int) Op {
					return func(ctx context.Context) (int, error) {
						got, err := read(ctx, s, l)
						if err == nil && got != l.hot {
							err = fmt.Errorf("read %d events, want %d", got, l.hot)
						}
						return got, err
					}
				}}, nil
			},
		}
	}
	return []Workload{
		mk("category", "Category", "catch up a category through the backend's filter", readCategory),
		mk("category-client", "CategoryClient", "catch up a category by filtering every page of $all in the client", readCategoryClient),
		mk("stream", "Stream", "catch up the one stream of the category", readHotStream),
		mk("all-same-size", "AllSameSize", "read as many events of $all, unfiltered", readAllSameSize),
	}
}

// hotLog is a log written by writeHotLog.
type hotLog struct {
	start    varve.Position // before the log
	category string         // of the hot events, all in one stream
	stream   string
	hot      int
}

// writeHotLog writes n events after the store's last position: 99 of each
// 100 to cold streams, one to the hot stream, whose category is unique to
// the run.
func writeHotLog(ctx context.Context, s *varve.Store, prefix string, n int) (*hotLog, error) {
	start, err := s.LastPosition(ctx)
	if err != nil {
		return nil, err
	}
	base := strings.NewReplacer("-", "", ".", "", "/", "").Replace(prefix)
	sep := s.Config().CategorySeparator
	l := &hotLog{start: start, category: base + "hot"}
	l.stream = l.category + sep + "0"
	cold := make([]varve.Event, filterEvery-1)
	for done := 0; done < n; done += filterEvery {
		for i := range cold {
			cold[i] = varve.Event{Type: "OrderPlaced", Data: Payload}
		}
		k := min(filterEvery-1, n-done)
		if _, err := s.Append(ctx, base+"cold"+sep+fmt.Sprint(done/filterEvery%100), varve.Any, cold[:k]...); err != nil {
			return nil, err
		}
		if k < filterEvery-1 {
			break
		}
		if _, err := s.Append(ctx, l.stream, varve.Any, varve.Event{Type: "OrderPaid", Data: Payload}); err != nil {
			return nil, err
		}
		l.hot++
	}
	return l, nil
}

func count(seq func(func(varve.RecordedEvent, error) bool)) (int, error) {
	n := 0
	for _, err := range seq {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func readCategory(ctx context.Context, s *varve.Store, l *hotLog) (int, error) {
	return count(s.ReadAll(ctx, l.start, varve.Filter{Categories: []string{l.category}}))
}

func readCategoryClient(ctx context.Context, s *varve.Store, l *hotLog) (int, error) {
	s, err := Scanning(s)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	f := varve.Filter{Categories: []string{l.category}}
	n, pos := 0, l.start
	for {
		page, err := s.ReadAllPage(ctx, pos, nil, f)
		if err != nil {
			return n, err
		}
		n += len(page.Events)
		if page.Through == pos || !page.Full {
			return n, nil
		}
		pos = page.Through
	}
}

func readHotStream(ctx context.Context, s *varve.Store, l *hotLog) (int, error) {
	return count(s.ReadStream(ctx, l.stream))
}

func readAllSameSize(ctx context.Context, s *varve.Store, l *hotLog) (int, error) {
	return count(s.ReadAll(ctx, l.start, varve.Limit(l.hot)))
}

// Scanning returns a store over the backend of s that hides every
// capability of it, so that its filtered reads filter pages of $all
// themselves, as a Store over a backend without [varve.FilteredReader]
// does: the reference that the backends' indexed reads must agree with,
// and the yardstick of their speed. Closing it leaves the backend open.
func Scanning(s *varve.Store) (*varve.Store, error) {
	return varve.New(coreOnly{s.Backend()}, s.Config())
}

// coreOnly is a backend with only the methods of [varve.Backend], and no
// Close: its store shares the backend of another.
type coreOnly struct{ varve.Backend }

func (coreOnly) Close() error { return nil }
