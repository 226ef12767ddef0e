package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// confirmIn is where subs reset and projections rebuild read their
// confirmation; tests replace it.
var confirmIn io.Reader = os.Stdin

// confirmName reads a line from confirmIn and reports whether it confirms
// name (see confirms). Reading blocks, so it runs in a goroutine of its
// own: when ctx ends first (the interrupt), confirmName returns
// context.Cause(ctx) at once and closes confirmIn if it is an io.Closer,
// which ends that goroutine's read of a pipe or a file; a read of a
// terminal ends with the process, which is ending.
func confirmName(ctx context.Context, name string) (bool, error) {
	in := confirmIn
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(in).ReadString('\n')
		got <- answer{line, err}
	}()
	select {
	case a := <-got:
		if a.err != nil && a.err != io.EOF {
			return false, a.err
		}
		return confirms(a.line, name), nil
	case <-ctx.Done():
		if c, ok := in.(io.Closer); ok {
			_ = c.Close()
		}
		return false, context.Cause(ctx)
	}
}

// confirms reports whether line, a typed answer, is name: as given
// (without its line ending), with blanks around it (which a name with
// blanks of its own may not have), or as the question shows it, quoted
// (strconv.Quote) with or without the quotes: the way to type a name that
// holds control characters.
func confirms(line, name string) bool {
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	trimmed := strings.TrimSpace(line)
	if line == name || trimmed == name {
		return true
	}
	for _, quoted := range []string{trimmed, `"` + trimmed + `"`} {
		if s, err := strconv.Unquote(quoted); err == nil && s == name {
			return true
		}
	}
	return false
}

// notConfirmed is the error of a question not confirmed: what stays as it
// was, and the error of the read or the interrupt that ended it, if any.
func notConfirmed(err error, format string, args ...any) error {
	if err != nil {
		return fmt.Errorf("not confirmed: %w: "+format, append([]any{err}, args...)...)
	}
	return fmt.Errorf("not confirmed: "+format, args...)
}
