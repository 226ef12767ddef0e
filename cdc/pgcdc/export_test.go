package pgcdc

// DecodeMessages runs the stream's decoder over pgoutput messages (the
// WALData of XLogData messages) and returns the changes of the
// transactions they complete.
func DecodeMessages(msgs [][]byte) (int, error) {
	d := newDecoder(false)
	n := 0
	for _, m := range msgs {
		tx, err := d.decode(m, 0)
		if err != nil {
			return n, err
		}
		if tx != nil {
			n += len(tx.Changes)
		}
	}
	return n, nil
}
