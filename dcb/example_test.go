package dcb_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/dcb"
)

// The course subscription example of the DCB specification: a course has
// a capacity, a student may take at most 3 courses, and no one subscribes
// twice. One decision spans the course and the student, without a stream
// for the pair.
func Example() {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	defineCourse := func(course string, capacity int) {
		e := varve.NewEvent("CourseDefined", fmt.Appendf(nil, `{"capacity":%d}`, capacity))
		e.Tags = []string{"course:" + course}
		if _, err := store.Append(ctx, "course-"+course, varve.NoStream, e); err != nil {
			panic(err)
		}
	}
	type state struct {
		defined      bool
		capacity     int
		subscribers  int
		studentTakes int
		already      bool
	}
	subscribe := func(student, course string) error {
		q := varve.Query{Items: []varve.QueryItem{
			{Types: []string{"CourseDefined", "StudentSubscribed"}, Tags: []string{"course:" + course}},
			{Types: []string{"StudentSubscribed"}, Tags: []string{"student:" + student}},
		}}
		apply := func(s state, e varve.RecordedEvent) state {
			onCourse := false
			for _, t := range e.Tags {
				onCourse = onCourse || t == "course:"+course
			}
			switch {
			case e.Type == "CourseDefined":
				var d struct{ Capacity int }
				_ = json.Unmarshal(e.Data, &d)
				s.defined, s.capacity = true, d.Capacity
			case onCourse:
				s.subscribers++
				for _, t := range e.Tags {
					s.already = s.already || t == "student:"+student
				}
				fallthrough
			default:
				for _, t := range e.Tags {
					if t == "student:"+student {
						s.studentTakes++
					}
				}
			}
			return s
		}
		decide := func(s state) (dcb.Decision, error) {
			switch {
			case !s.defined:
				return dcb.Decision{}, errors.New("no such course")
			case s.already:
				return dcb.Decision{}, errors.New("already subscribed")
			case s.subscribers >= s.capacity:
				return dcb.Decision{}, errors.New("course full")
			case s.studentTakes >= 3:
				return dcb.Decision{}, errors.New("student takes 3 courses already")
			}
			e := varve.NewEvent("StudentSubscribed", nil)
			e.Tags = []string{"student:" + student, "course:" + course}
			return dcb.Decision{Stream: "subscriptions-" + course, Events: []varve.Event{e}}, nil
		}
		_, _, err := dcb.Execute(ctx, store, q, state{}, apply, decide, dcb.Options{})
		return err
	}

	for _, c := range []string{"c1", "c2", "c3", "c4"} {
		defineCourse(c, 2)
	}
	for _, try := range [][2]string{
		{"ann", "c1"}, {"bob", "c1"}, {"cid", "c1"}, {"ann", "c1"},
		{"ann", "c2"}, {"ann", "c3"}, {"ann", "c4"}, {"ann", "c5"},
	} {
		if err := subscribe(try[0], try[1]); err != nil {
			fmt.Printf("%s to %s: %v\n", try[0], try[1], err)
		} else {
			fmt.Printf("%s to %s: subscribed\n", try[0], try[1])
		}
	}
	// Output:
	// ann to c1: subscribed
	// bob to c1: subscribed
	// cid to c1: course full
	// ann to c1: already subscribed
	// ann to c2: subscribed
	// ann to c3: subscribed
	// ann to c4: student takes 3 courses already
	// ann to c5: no such course
}
