package sqlite_test

func crashChild() bool { return false }
