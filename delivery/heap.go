package delivery

// minHeap is a binary heap whose top is the least element by less. The
// dispatcher keeps two: the ready events by read order and the retries by
// due time.
type minHeap[T any] struct {
	items []T
	less  func(a, b T) bool
}

func newMinHeap[T any](less func(a, b T) bool) minHeap[T] {
	return minHeap[T]{less: less}
}

func (h *minHeap[T]) Len() int { return len(h.items) }

// Top returns the least element; the heap must not be empty.
func (h *minHeap[T]) Top() T { return h.items[0] }

func (h *minHeap[T]) Push(x T) {
	h.items = append(h.items, x)
	h.up(len(h.items) - 1)
}

// Pop removes and returns the least element; the heap must not be empty.
func (h *minHeap[T]) Pop() T {
	n := len(h.items) - 1
	top := h.items[0]
	h.items[0] = h.items[n]
	var zero T
	h.items[n] = zero // drop the reference
	h.items = h.items[:n]
	h.down(0)
	return top
}

func (h *minHeap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.items[i], h.items[p]) {
			return
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *minHeap[T]) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		least := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			least = r
		}
		if !h.less(h.items[least], h.items[i]) {
			return
		}
		h.items[i], h.items[least] = h.items[least], h.items[i]
		i = least
	}
}
