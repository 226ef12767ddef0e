package nats

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
)

// Subject layouts of the event subjects of a JetStream stream. A stream
// has one layout for its whole life, named by the layout marker, the one
// message on <prefix>.l.
const (
	// layoutStreamID: <prefix>.e.<id>, the layout before categories (no
	// marker, or a marker that says 1). Filtered reads are not pushed down.
	layoutStreamID byte = 1
	// layoutCategory: <prefix>.e.<category>.<rest>, so that a subject
	// filter <prefix>.e.<category>.* reads one category.
	layoutCategory byte = 2
)

// Tokens of the category layout that encodeID never writes: an empty
// category, a stream id without the separator (the id is its category),
// and an empty rest after the separator.
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
// <prefix>.c. for chunks): one token in the stream id layout, two in the
// category layout.
func (b *Backend) token(stream string) string {
	if b.layout != layoutCategory {
		return encodeID(stream)
	}
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

// streamOf decodes the stream id of an event subject, of either layout,
// and its category token (the whole token in the stream id layout).
func (b *Backend) streamOf(subject string) (stream, catTok string, err error) {
	tok, ok := strings.CutPrefix(subject, b.evPrefix)
	if !ok {
		return "", "", errBadToken
	}
	catTok, rest, two := strings.Cut(tok, ".")
	if !two {
		stream, err = decodeID(tok)
		return stream, tok, err
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
// written by an earlier version of this package, or was just created: it
// gets the stream id layout if it holds event messages, the category
// layout if not, and the first process to store the marker decides for
// all.
func (b *Backend) loadLayout(ctx context.Context) error {
	if b.cfg.legacyLayout {
		b.layout, b.sep = layoutStreamID, b.cfg.CategorySeparator
		return nil
	}
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
	if len(m.Data) < 2 || (m.Data[0] != layoutStreamID && m.Data[0] != layoutCategory) {
		return fmt.Errorf("nats: layout marker %q on %s: %w", m.Data, b.layoutSubj, errCorrupt)
	}
	b.layout, b.sep = m.Data[0], string(m.Data[1:])
	if b.layout == layoutCategory && b.cfg.CategorySeparator != "" && b.cfg.CategorySeparator != b.sep {
		return fmt.Errorf("nats: stream %s splits categories at %q, the config at %q: %w",
			b.cfg.Stream, b.sep, b.cfg.CategorySeparator, varve.ErrInvalidArgument)
	}
	return nil
}

// Layout describes the subject layout of the backend's stream: whether
// stream subjects carry the category (filtered reads of $all read only
// the subjects of the filter's categories), and the category separator.
func (b *Backend) Layout() (categories bool, separator string) {
	return b.layout == layoutCategory, b.sep
}
