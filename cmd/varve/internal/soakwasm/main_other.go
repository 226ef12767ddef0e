//go:build !(js && wasm)

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "soakwasm runs in a browser: build it with GOOS=js GOARCH=wasm and serve it with `varve soak --browser`")
	os.Exit(2)
}
