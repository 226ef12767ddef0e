package nats

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
)

// The layout marker, the one message on <prefix>.l, holds a layout byte
// and the stream's category separator. A stream has one layout for its
// whole life.
const (
	// layoutStreamID: <prefix>.e.<id>, the layout before categories. It
	// is no longer read: only recognised, to refuse the stream.
	layoutStreamID byte = 1
	// layoutCategory: <prefix>.e.<category>.<rest>, so that a subject
	// filter <prefix>.e.<category>.* reads one category.
	layoutCategory byte = 2
)

// ErrOldLayout is in the error of New on a stream of the subject layout
// before categories (one token per stream id, <prefix>.e.<id>), which this
// package no longer reads or writes. It wraps varve.ErrNotSupported.
var ErrOldLayout = fmt.Errorf("subject layout before categories (<prefix>.e.<id>, written by an earlier version of this package): %w", varve.ErrNotSupported)

// Tokens that encodeID never writes: an empty category, a stream id
// without the separator (the id is its category), and an empty rest after
// the separator.
const (
	emptyToken = "="
	noRest     = "="
	emptyRest  = "=="
)

// categoryOf is the category of stream: its id up to the first sep, or the
// whole id (as varve.Store.Category).
func categoryOf(stream, sep string) string {
	if i := strings.Index(stream, sep); i >= 0 {
		return stream[:i]
	}
	return stream
}

func categoryToken(cat string) string {
	if cat == "" {
		return emptyToken
	}
	return encodeID(cat)
}

// token is the part of the stream's subjects after <prefix>.e. (and
// <prefix>.c. for chunks): two tokens, its category's and the rest's.
func (b *Backend) token(stream string) string {
	i := strings.Index(stream, b.sep)
	if i < 0 {
		return categoryToken(stream) + "." + noRest
	}
	rest := stream[i+len(b.sep):]
	if rest == "" {
		return categoryToken(stream[:i]) + "." + emptyRest
	}
	return categoryToken(stream[:i]) + "." + encodeID(rest)
}

// subject is the subject of the stream's commits and markers.
func (b *Backend) subject(stream string) string { return b.evPrefix + b.token(stream) }

// categorySubject is the subject filter of the commits of a category.
func (b *Backend) categorySubject(cat string) string {
	return b.evPrefix + categoryToken(cat) + ".*"
}

// streamOf decodes the stream id of an event subject and its category
// token.
func (b *Backend) streamOf(subject string) (stream, catTok string, err error) {
	tok, ok := strings.CutPrefix(subject, b.evPrefix)
	if !ok {
		return "", "", errBadToken
	}
	catTok, rest, two := strings.Cut(tok, ".")
	if !two {
		return "", "", errBadToken
	}
	cat := ""
	if catTok != emptyToken {
		if cat, err = decodeID(catTok); err != nil {
			return "", "", err
		}
	}
	switch rest {
	case noRest:
		return cat, catTok, nil
	case emptyRest:
		return cat + b.sep, catTok, nil
	}
	r, err := decodeID(rest)
	if err != nil {
		return "", "", err
	}
	return cat + b.sep + r, catTok, nil
}

func checkSeparator(sep string) error {
	if sep == "" || len(sep) > 8 || !utf8.ValidString(sep) || strings.IndexByte(sep, 0) >= 0 {
		return fmt.Errorf("nats: config: category separator %q: 1..8 bytes of UTF-8 without NUL: %w", sep, varve.ErrInvalidArgument)
	}
	return nil
}

// loadLayout reads the stream's layout marker. A stream without one was
// just created, and gets the category layout; one that holds event
// messages was written before the marker, in the old layout, and gets a
// marker that says so. The marker is stored at expected last subject
// sequence 0, so the first process to store it decides for all.
func (b *Backend) loadLayout(ctx context.Context) error {
	for range 3 {
		m, found, err := b.c.GetLast(ctx, b.layoutSubj)
		if err != nil {
			return fmt.Errorf("nats: read layout marker: %w", err)
		}
		if found {
			return b.useLayout(m)
		}
		v := layoutCategory
		if _, events, err := b.c.GetLast(ctx, b.allSubj); err != nil {
			return fmt.Errorf("nats: read last event message: %w", err)
		} else if events {
			v = layoutStreamID
		}
		sep := b.cfg.CategorySeparator
		if sep == "" {
			sep = varve.DefaultCategorySeparator
		}
		_, err = b.c.Publish(ctx, b.layoutSubj, append([]byte{v}, sep...), jsclient.Expect{CheckLast: true})
		if err != nil && !jsclient.IsWrongLastSequence(err) {
			return fmt.Errorf("nats: store layout marker: %w", err)
		}
		// Stored, or another process stored one first: read it.
	}
	return fmt.Errorf("nats: layout marker on %s: not found after storing it", b.layoutSubj)
}

func (b *Backend) useLayout(m jsclient.Msg) error {
	if len(m.Data) >= 1 && m.Data[0] == layoutStreamID {
		return fmt.Errorf("nats: stream %s: %w", b.cfg.Stream, ErrOldLayout)
	}
	if len(m.Data) < 2 || m.Data[0] != layoutCategory {
		return fmt.Errorf("nats: layout marker %q on %s: %w", m.Data, b.layoutSubj, errCorrupt)
	}
	b.sep = string(m.Data[1:])
	if b.cfg.CategorySeparator != "" && b.cfg.CategorySeparator != b.sep {
		return fmt.Errorf("nats: stream %s splits categories at %q, the config at %q: %w",
			b.cfg.Stream, b.sep, b.cfg.CategorySeparator, varve.ErrInvalidArgument)
	}
	return nil
}

// CategorySeparator is the separator at which the backend's stream splits
// a stream id into its category (the first subject token after
// <prefix>.e.) and the rest: the one the stream was created with.
func (b *Backend) CategorySeparator() string { return b.sep }
