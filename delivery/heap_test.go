package delivery

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMinHeap: pushes and pops in random interleavings give the elements in
// order, as a sorted reference says.
func TestMinHeap(t *testing.T) {
	type elem struct{ key, id int }
	for _, tc := range []struct {
		name      string
		n, keys   int
		popChance int // percent
	}{
		{"empty", 0, 1, 0},
		{"one", 1, 1, 0},
		{"distinct keys", 1000, 1 << 30, 30},
		{"many equal keys", 1000, 4, 50},
		{"push all then pop", 500, 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), uint64(tc.keys)))
			h := newMinHeap(func(a, b *elem) bool { return a.key < b.key })
			var ref []*elem // the heap's content
			popBoth := func() {
				slices.SortStableFunc(ref, func(a, b *elem) int { return a.key - b.key })
				got := h.Pop()
				if got.key != ref[0].key {
					t.Fatalf("popped key %d, want %d", got.key, ref[0].key)
				}
				i := slices.Index(ref, got)
				if i < 0 {
					t.Fatalf("popped %+v, which is not in the heap", got)
				}
				ref = slices.Delete(ref, i, i+1)
			}
			for i := range tc.n {
				e := &elem{key: rng.IntN(tc.keys), id: i}
				h.Push(e)
				ref = append(ref, e)
				if h.Len() != len(ref) {
					t.Fatalf("len %d, want %d", h.Len(), len(ref))
				}
				if rng.IntN(100) < tc.popChance {
					popBoth()
				}
			}
			for len(ref) > 0 {
				top := h.Top()
				popBoth()
				if h.Len() != len(ref) || len(ref) > 0 && h.Top().key < top.key {
					t.Fatalf("heap order broken after popping %+v", top)
				}
			}
			if h.Len() != 0 || cap(h.items) > 0 && slices.ContainsFunc(h.items[:cap(h.items)], func(e *elem) bool { return e != nil }) {
				t.Fatal("an emptied heap keeps references to its elements")
			}
		})
	}
}
