package sqlite

import (
	"context"
	"errors"
	"sync"

	"github.com/varve-go/varve"
)

// pool hands out at most cap(sem) connections, opening them on demand and
// keeping them open while idle.
type pool struct {
	sem  chan struct{}
	open func() (*conn, error)

	mu     sync.Mutex
	idle   []*conn
	closed bool
}

func newPool(size int, open func() (*conn, error)) *pool {
	return &pool{sem: make(chan struct{}, size), open: open}
}

func (p *pool) get(ctx context.Context) (*conn, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.sem
		return nil, varve.ErrClosed
	}
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	c, err := p.open()
	if err != nil {
		<-p.sem
		return nil, err
	}
	return c, nil
}

// put returns c to the pool; a broken connection is closed instead.
func (p *pool) put(c *conn, broken bool) {
	p.mu.Lock()
	if p.closed || broken {
		p.mu.Unlock()
		_ = c.close()
	} else {
		p.idle = append(p.idle, c)
		p.mu.Unlock()
	}
	<-p.sem
}

// close closes the idle connections; those in use are closed when they are
// put back.
func (p *pool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for _, c := range p.idle {
		errs = append(errs, c.close())
	}
	p.idle = nil
	return errors.Join(errs...)
}
