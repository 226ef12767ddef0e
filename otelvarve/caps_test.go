package otelvarve

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/internal/teststore"
)

// has reports which capabilities b has, as compose's mask.
func has(b varve.Backend) uint {
	var mask uint
	for i, ok := range []bool{
		is[varve.SnapshotStore](b), is[varve.CheckpointStore](b), is[varve.Watcher](b),
		is[varve.StreamLister](b), is[varve.CheckpointLister](b),
	} {
		if ok {
			mask |= 1 << i
		}
	}
	return mask
}

func is[T any](b varve.Backend) bool { _, ok := b.(T); return ok }

// storeHas reports which capabilities a Store found, as has does.
func storeHas(s *varve.Store) uint {
	var mask uint
	for i, ok := range []bool{
		s.Snapshots().Supported(), s.Checkpoints().Supported(), s.CanWatch(),
		s.Streams().Supported(), s.Checkpoints().Listable(),
	} {
		if ok {
			mask |= 1 << i
		}
	}
	return mask
}

// TestWrapKeepsExactlyTheCapabilities wraps a backend with each of the 32
// combinations of capabilities and checks that the wrapper has those and
// no other, and that a Store over it finds the same.
func TestWrapKeepsExactlyTheCapabilities(t *testing.T) {
	if len(capabilities) != 5 {
		t.Fatalf("the test knows 5 capabilities, the package %d: extend has and storeHas", len(capabilities))
	}
	for mask := uint(0); mask < 1<<len(capabilities); mask++ {
		inner := restrict(memory.New(), mask)
		if got := has(inner); got != mask {
			t.Fatalf("restrict(%#x) has %#x", mask, got)
		}
		w := Wrap(inner)
		if got := has(w); got != mask {
			t.Errorf("Wrap of a backend with capabilities %#x has %#x", mask, got)
		}
		if Unwrap(w) != inner {
			t.Errorf("Unwrap of the wrapper of %#x is not the backend it wraps", mask)
		}
		s, err := varve.New(w, varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		want := mask
		if mask&2 == 0 {
			want &^= 16 // the Store lists checkpoints only of a checkpoint store
		}
		if got := storeHas(s); got != want {
			t.Errorf("a Store over the wrapper of %#x finds %#x, want %#x", mask, got, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCapabilitiesSurviveWrapOnEveryBackend compares the capabilities a
// Store finds on each backend with and without the wrapper, and uses each
// through the wrapped Store.
func TestCapabilitiesSurviveWrapOnEveryBackend(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		b := k.Backend(t)
		want := has(b)
		if want == 0 {
			t.Fatalf("%s has no capability: the test proves nothing", k.Name)
		}
		s, err := varve.New(Wrap(b), varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := storeHas(s); got != want {
			t.Fatalf("wrapped %s: the Store finds capabilities %#x, the backend has %#x", k.Name, got, want)
		}
		if want&1 != 0 {
			snap := varve.Snapshot{Stream: "caps-snap", Version: 3, SchemaVersion: 1, Data: []byte(`{"n":3}`), TakenAt: time.Now().UTC()}
			if err := s.Snapshots().Save(ctx, snap); err != nil {
				t.Fatal(err)
			}
			got, ok, err := s.Snapshots().Load(ctx, "caps-snap")
			if err != nil || !ok || got.Version != 3 || string(got.Data) != `{"n":3}` {
				t.Fatalf("snapshot through the wrapper: %+v %v %v", got, ok, err)
			}
		}
		if want&2 != 0 {
			if err := s.Checkpoints().Save(ctx, "caps-cp", varve.Position{Seq: 7}); err != nil {
				t.Fatal(err)
			}
			pos, ok, err := s.Checkpoints().Load(ctx, "caps-cp")
			if err != nil || !ok || pos != (varve.Position{Seq: 7}) {
				t.Fatalf("checkpoint through the wrapper: %v %v %v", pos, ok, err)
			}
		}
		var wake <-chan struct{}
		if want&4 != 0 {
			wake = s.Watch()
		}
		if _, err := s.Append(ctx, "caps-stream", varve.NoStream, varve.NewEvent("t", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
		if wake != nil {
			select {
			case <-wake:
			case <-time.After(time.Minute): // a bound on a hang, not a timing assertion
				t.Fatal("Watch through the wrapper never woke up after an append")
			}
		}
		if want&8 != 0 {
			page, err := s.Streams().List(ctx, varve.ListQuery{Prefix: "caps-"}, false)
			if err != nil || len(page.Streams) != 1 || page.Streams[0].Stream != "caps-stream" {
				t.Fatalf("stream list through the wrapper: %+v %v", page, err)
			}
		}
		if want&16 != 0 {
			page, err := s.Checkpoints().List(ctx, varve.ListQuery{Prefix: "caps-"})
			if err != nil || len(page.Checkpoints) != 1 || page.Checkpoints[0].Name != "caps-cp" {
				t.Fatalf("checkpoint list through the wrapper: %+v %v", page, err)
			}
		}
	})
}

// TestCapabilityListIsComplete finds the capability interfaces of the root
// package (exported interfaces whose methods are all exported, other than
// Backend) and checks that gen_caps.go knows each of them, so that a new
// capability is not hidden by the wrapper.
func TestCapabilityListIsComplete(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !ts.Name.IsExported() || ts.Name.Name == "Backend" {
				return true
			}
			it, ok := ts.Type.(*ast.InterfaceType)
			if !ok || len(it.Methods.List) == 0 {
				return true
			}
			for _, m := range it.Methods.List {
				if len(m.Names) == 0 || !m.Names[0].IsExported() {
					return true
				}
			}
			found = append(found, ts.Name.Name)
			return true
		})
	}
	if len(found) < 3 {
		t.Fatalf("found %v: the parse proves nothing", found)
	}
	for _, c := range found {
		if !slices.Contains(capabilities, c) {
			t.Errorf("the root declares capability %s, which the wrapper would hide: add it to gen_caps.go and run go generate", c)
		}
	}
	for _, c := range capabilities {
		if !slices.Contains(found, c) {
			t.Errorf("gen_caps.go lists %s, which the root no longer declares", c)
		}
	}
}
