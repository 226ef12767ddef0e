// Command soakwasm is the browser soak: a WebAssembly module (GOOS=js
// GOARCH=wasm) that runs the soak workload of package soakcore on the
// memory backend inside the page of package soakweb. The page starts a run
// with the global function varveSoakStart(config JSON); the module sets
// its memory limit with debug.SetMemoryLimit, passes every memory sample to
// the page's varveSoakSample(figures JSON) and the end of the run to
// varveSoakDone(result JSON). Built for any other platform it only says
// how to build it.
package main
