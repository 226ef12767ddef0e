package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Size returns the bytes of the database: its pages as a reader sees them
// (page_count × page_size, free pages included: the file's size once a
// checkpoint has copied the write-ahead log into it) plus the bytes of the
// log's file (the -wal beside it, which SQLite keeps for reuse after a
// checkpoint). So it is about what the store takes on disk after the next
// checkpoint, and counts a page written since the last one twice. An
// in-memory database counts its pages.
func (b *Backend) Size(ctx context.Context) (int64, error) {
	var pages int64
	err := b.read(ctx, func(c *conn) error {
		_, err := c.queryRow(ctx, "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
			func(v []driver.Value) { pages = asInt(v[0]) })
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: size: %w", err)
	}
	if b.memory {
		return pages, nil
	}
	fi, err := os.Stat(b.path + "-wal")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return pages, nil
	case err != nil:
		return 0, fmt.Errorf("sqlite: size of the write-ahead log: %w", err)
	}
	return pages + fi.Size(), nil
}
