#!/usr/bin/env bash
# Makes sure the test servers run on loopback: PostgreSQL at 127.0.0.1:5432
# (trust auth, database "test") and NATS with JetStream at 127.0.0.1:4222.
# Starts a server that is installed but stopped; never installs a server.
# It does install Debian's chromium (scripts/chromium.sh), which the tests
# of the lab's HTML reports render them with.
# Tests decide what a missing server means (skip, or fail under CI=true).
set -uo pipefail

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_up() {
  for _ in $(seq 1 50); do up "$1" && return 0; sleep 0.2; done
  return 1
}

if ! up 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "services: starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    wait_up 5432 || echo "services: PostgreSQL did not come up" >&2
  else
    echo "services: PostgreSQL is not installed; its tests will skip (or fail with CI=true)" >&2
  fi
fi
if up 5432 && command -v psql >/dev/null 2>&1; then
  psql -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='test'" 2>/dev/null | grep -q 1 ||
    psql -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE test" >/dev/null 2>&1 || true
fi

if ! up 4222; then
  if [ -x /usr/sbin/nats-server ]; then
    echo "services: starting NATS"
    mkdir -p /var/lib/nats-server
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
      -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server || true
    wait_up 4222 || echo "services: NATS did not come up" >&2
  else
    echo "services: nats-server is not installed; its tests will skip (or fail with CI=true)" >&2
  fi
fi
bash "$(dirname "$0")/chromium.sh"
exit 0
