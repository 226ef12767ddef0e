package projection

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/varve-go/varve"
)

// currentType is the type of the events of a projection's control stream.
const currentType = "projection.current"

type currentRecord struct {
	Version int `json:"version"`
}

// Current returns the version of projection name whose read model is to be
// served; ok is false when no version was made current yet.
func Current(ctx context.Context, store *varve.Store, name string) (version int, ok bool, err error) {
	c, err := ReadControl(ctx, store, name)
	if err != nil {
		return 0, false, fmt.Errorf("projection %q: current version: %w", name, err)
	}
	return c.Current, c.Current > 0, nil
}

// SetCurrent makes version the current version of projection name. The
// switch is one append to the projection's control stream: readers see the
// old version or the new one, never neither.
func SetCurrent(ctx context.Context, store *varve.Store, name string, version int) error {
	data, _ := json.Marshal(currentRecord{Version: version})
	if _, err := store.System().Append(ctx, ControlStream(name), varve.Any, varve.NewEvent(currentType, data)); err != nil {
		return fmt.Errorf("projection %q: set current version %d: %w", name, version, err)
	}
	return nil
}

// Drop drops version of projection name on request, once another version
// is current: it calls drop, which removes the version's read model (say,
// DROP TABLE). It refuses to drop the current version. The version's
// checkpoint stays: the store cannot delete checkpoints.
func Drop(ctx context.Context, store *varve.Store, name string, version int, drop func(ctx context.Context) error) error {
	cur, ok, err := Current(ctx, store, name)
	if err != nil {
		return err
	}
	if ok && cur == version {
		return fmt.Errorf("projection %q: drop version %d: %w: it is the current version", name, version, varve.ErrInvalidArgument)
	}
	if drop != nil {
		if err := drop(ctx); err != nil {
			return fmt.Errorf("projection %q: drop version %d: %w", name, version, err)
		}
	}
	return nil
}
