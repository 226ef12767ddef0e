module github.com/varve-go/varve/scripts/peers/gomink

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/varve-go/varve v0.0.0
	go-mink.dev v0.0.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/varve-go/varve => ../../..

// go-mink is not served by the module proxy: clone it here (README.md).
replace go-mink.dev => ./go-mink
