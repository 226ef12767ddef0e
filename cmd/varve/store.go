package main

// defaultStore is the store the lab commands use when --store is not given.
const defaultStore = "memory:"
