package lab

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"

	natsbackend "github.com/varve-go/varve/backend/nats"
	"github.com/varve-go/varve/backend/postgres"
)

func serverVersion(ctx context.Context, backend, raw string) (string, error) {
	switch backend {
	case "sqlite":
		db, err := sql.Open("sqlite", ":memory:")
		if err != nil {
			return "", err
		}
		defer db.Close()
		var v string
		err = db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&v)
		return "SQLite " + v, err
	case "postgres":
		cfg, err := postgres.ParseURL(raw)
		if err != nil {
			return "", err
		}
		conn, err := pgx.Connect(ctx, cfg.ConnString)
		if err != nil {
			return "", err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var v string
		err = conn.QueryRow(ctx, "SHOW server_version").Scan(&v)
		return "PostgreSQL " + v, err
	case "nats":
		cfg, err := natsbackend.ParseURL(raw)
		if err != nil {
			return "", err
		}
		nc, err := natsgo.Connect(cfg.URL, natsgo.Name("varve-lab-version"))
		if err != nil {
			return "", err
		}
		defer nc.Close()
		return "NATS " + nc.ConnectedServerVersion(), nil
	}
	return "", nil
}
