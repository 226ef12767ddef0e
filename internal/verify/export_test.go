package verify

// WithSkip returns cfg whose consumers each drop the n-th event handed to
// them, as a consumer that skipped it would.
func WithSkip(cfg Config, n int) Config {
	cfg.skip = n
	return cfg
}
