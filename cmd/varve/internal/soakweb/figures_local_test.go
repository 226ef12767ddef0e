//go:build soakfigures

package soakweb

import (
	"os"
	"testing"
	"time"
)

func TestFiguresSustained(t *testing.T) {
	_, url := serve(t)
	b := newTab(t)
	res := b.run(url+"?autostart=1&mode=sustained&duration=130&limit_mib=512&prune_above=20000&rate=0&workers=4&aggregates=1000&interval_ms=1000", 170*time.Second)
	t.Log(res)
	os.Setenv("VARVE_SCREENSHOTS", "/tmp/shots")
	b.shot("figures-sustained")
}

func TestFiguresDiscovery(t *testing.T) {
	_, url := serve(t)
	b := newTab(t)
	res := b.run(url+"?autostart=1&mode=discovery&duration=160&limit_mib=512&workers=4&aggregates=1000&interval_ms=1000", 170*time.Second)
	t.Log(res)
	os.Setenv("VARVE_SCREENSHOTS", "/tmp/shots")
	b.shot("figures-discovery")
}
