package memory_test

import (
	"testing"

	"github.com/varve-go/varve/backend/backendtest"
)

// TestLogScale: appends, $all and a category read as the log grows to 10
// million events (opt-in, VARVE_LOG_SCALE=1).
func TestLogScale(t *testing.T) { backendtest.RunLogScale(t, benchFactory) }
