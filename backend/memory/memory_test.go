package memory_test

import (
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/memory"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Factory{
		New: func(testing.TB) varve.Backend { return memory.New() },
	})
}
