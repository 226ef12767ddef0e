package lab

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/varve-go/varve/internal/workload"
)

// progress shows what a bench run is doing. On a terminal it redraws one
// line five times a second; elsewhere (a log, a pipe) it writes a line every
// five seconds. Either way it writes a line when a measurement ends. Its
// goroutine is started by newProgress and ended by stop.
type progress struct {
	w     io.Writer
	tty   bool
	every time.Duration

	mu    sync.Mutex
	label string
	live  *Live
	units int
	unit  workload.Unit
	drawn bool // a redrawable line is on the terminal

	quit chan struct{}
	done chan struct{}
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if w == nil {
		return p
	}
	p.every = 5 * time.Second
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty, p.every = true, 200*time.Millisecond
		}
	}
	p.quit, p.done = make(chan struct{}), make(chan struct{})
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer close(p.done)
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
			p.mu.Lock()
			p.draw()
			p.mu.Unlock()
		}
	}
}

// draw writes the current line; p.mu is held.
func (p *progress) draw() {
	if p.live == nil {
		return
	}
	n := p.live.Events()
	if p.unit == workload.Ops {
		n = p.live.Ops()
	}
	el := p.live.Elapsed()
	line := p.label + ": preparing"
	if el > 0 {
		line = fmt.Sprintf("%s: %s/%s %s, %v", p.label, GroupDigits(float64(n)), GroupDigits(float64(p.units)), p.unit, el.Round(100*time.Millisecond))
		if s := el.Seconds(); s >= 0.5 {
			line += fmt.Sprintf(", %s %s/s", GroupDigits(float64(n)/s), p.unit)
		}
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
		p.drawn = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// begin announces a measurement of units on store.
func (p *progress) begin(store, name, note string, live *Live, units int, unit workload.Unit) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label = strings.TrimSpace(store + " " + name + " " + note)
	p.live, p.units, p.unit = live, units, unit
	if p.tty {
		p.draw()
	}
}

// end writes the result line of the current measurement.
func (p *progress) end(msg string) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
	fmt.Fprintf(p.w, "%s: %s\n", p.label, msg)
	p.live = nil
}

func (p *progress) stop() {
	if p.quit == nil {
		return
	}
	close(p.quit)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
