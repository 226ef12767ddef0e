package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

var _ varve.KeyStore = (*Backend)(nil)

const (
	qGetKey    = `SELECT id, master, wrapped, created FROM keys WHERE subject = ?1`
	qInsertKey = `INSERT INTO keys (subject, id, master, wrapped, created) VALUES (?1, ?2, ?3, ?4, ?5)`
	qDeleteKey = `DELETE FROM keys WHERE subject = ?1 AND id = ?2`
	qRewrapKey = `UPDATE keys SET master = ?3, wrapped = ?4 WHERE subject = ?1 AND id = ?2 AND master = ?5`
	qListKeys  = `SELECT subject, id, master, wrapped, created FROM keys WHERE subject > ?1 ORDER BY subject LIMIT ?2`

	// A deletion or a rewrap overwrites the bytes it removes from the
	// file's pages, and only those: secure_delete is on for its statement
	// alone.
	qSecureDeleteOn  = `PRAGMA secure_delete = ON`
	qSecureDeleteOff = `PRAGMA secure_delete = OFF`
	// After the commit of a deletion: the WAL's pages into the file, and
	// the WAL truncated to nothing, so that it no longer holds the old
	// page.
	qCheckpointTruncate = `PRAGMA wal_checkpoint(TRUNCATE)`
)

func scanKey(subject string, v []driver.Value) varve.WrappedKey {
	k := varve.WrappedKey{Subject: subject, Master: asString(v[1]), Wrapped: asBytes(v[2]), Created: fromNanos(v[3])}
	copy(k.ID[:], asBytes(v[0]))
	return k
}

// PutKey implements [varve.KeyStore].
func (b *Backend) PutKey(ctx context.Context, k varve.WrappedKey) (varve.WrappedKey, error) {
	o := &op{ctx: ctx, kind: opPutKey, key: k}
	if err := b.submit(o); err != nil {
		return varve.WrappedKey{}, err
	}
	return o.key, nil
}

// GetKey implements [varve.KeyStore].
func (b *Backend) GetKey(ctx context.Context, subject string) (varve.WrappedKey, error) {
	var k varve.WrappedKey
	var found bool
	err := b.read(ctx, func(c *conn) (err error) {
		found, err = c.queryRow(ctx, qGetKey, func(v []driver.Value) { k = scanKey(subject, v) }, subject)
		return err
	})
	switch {
	case err != nil:
		return varve.WrappedKey{}, fmt.Errorf("sqlite: get key: %w", err)
	case !found:
		return varve.WrappedKey{}, varve.ErrKeyNotFound
	}
	return k, nil
}

// DeleteKey implements [varve.KeyStore]. It returns once the deletion is
// committed and the checkpoint after it has run (see the package doc).
func (b *Backend) DeleteKey(ctx context.Context, subject string, id uuid.UUID) (bool, error) {
	o := &op{ctx: ctx, kind: opDeleteKey, key: varve.WrappedKey{Subject: subject, ID: id}}
	if err := b.submit(o); err != nil {
		return false, err
	}
	return o.changed, nil
}

// ListKeys implements [varve.KeyStore].
func (b *Backend) ListKeys(ctx context.Context, after string, limit int, buf []varve.WrappedKey) ([]varve.WrappedKey, error) {
	n := len(buf)
	err := b.read(ctx, func(c *conn) error {
		buf = buf[:n]
		return c.query(ctx, qListKeys, func(v []driver.Value) error {
			buf = append(buf, scanKey(asString(v[0]), v[1:]))
			return nil
		}, after, int64(limit))
	})
	if err != nil {
		return buf[:n], fmt.Errorf("sqlite: list keys: %w", err)
	}
	return buf, nil
}

// RewrapKey implements [varve.KeyStore].
func (b *Backend) RewrapKey(ctx context.Context, k varve.WrappedKey, oldMaster string) (bool, error) {
	o := &op{ctx: ctx, kind: opRewrapKey, key: k, oldMaster: oldMaster}
	if err := b.submit(o); err != nil {
		return false, err
	}
	return o.changed, nil
}

func (w *writer) putKey(o *op) (error, bool) {
	k := o.key
	found, err := w.c.queryRow(bg, qGetKey, func(v []driver.Value) { o.key = scanKey(k.Subject, v) }, k.Subject)
	if err != nil {
		return fmt.Errorf("sqlite: put key: %w", err), true
	}
	if found {
		return nil, false
	}
	if _, err := w.c.exec(bg, qInsertKey, k.Subject, k.ID[:], k.Master, k.Wrapped, w.now); err != nil {
		return fmt.Errorf("sqlite: put key: %w", err), true
	}
	k.Created = fromNanos(w.now)
	o.key = k
	return nil, false
}

func (w *writer) deleteKey(o *op) (error, bool) {
	return w.secureDelete("delete key", &o.changed, qDeleteKey, o.key.Subject, o.key.ID[:])
}

func (w *writer) rewrapKey(o *op) (error, bool) {
	k := o.key
	return w.secureDelete("rewrap key", &o.changed, qRewrapKey, k.Subject, k.ID[:], k.Master, k.Wrapped, o.oldMaster)
}

// secureDelete runs q, which removes bytes from the file's pages, with
// secure_delete on, and reports in changed whether it changed a row.
func (w *writer) secureDelete(what string, changed *bool, q string, args ...driver.Value) (error, bool) {
	*changed = false
	if _, err := w.c.exec(bg, qSecureDeleteOn); err != nil {
		return fmt.Errorf("sqlite: %s: %w", what, err), true
	}
	res, err := w.c.exec(bg, q, args...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if _, off := w.c.exec(bg, qSecureDeleteOff); err == nil {
		err = off
	}
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", what, err), true
	}
	*changed = n > 0
	return nil, false
}

// checkpointTruncate copies the WAL into the file and truncates it, after
// a commit that deleted a key. It is best effort: a reader of an older
// snapshot that does not finish within the busy timeout keeps the WAL (the
// next checkpoint copies the overwritten page, and the WAL's frames are
// overwritten as it is reused).
func (w *writer) checkpointTruncate() {
	if w.b.memory {
		return
	}
	var busy int64
	_, err := w.c.queryRow(bg, qCheckpointTruncate, func(v []driver.Value) { busy = asInt(v[0]) })
	if err != nil || busy != 0 {
		w.b.keyCkptBusy.Add(1)
	}
}
