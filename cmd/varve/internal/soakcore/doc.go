// Package soakcore is the soak workload and its memory monitor, apart from
// the lab so that it builds for js/wasm: it works on a [varve.Store] it is
// given and imports no backend, driver or network client. The native soak
// (package lab, `varve soak`) opens the store and writes the reports; the
// browser soak (package soakwasm) runs it on the memory backend inside a
// WebAssembly module.
//
// [Run] runs commands on accounts (load, decide, save), stream reads, a
// $all follower and, in [Sustained] mode, pruning, while [Monitor] samples
// memory; [Judge] decides from the samples whether memory stayed flat.
package soakcore
