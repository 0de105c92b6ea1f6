#!/bin/sh
# Entrypoint of postgres.Dockerfile: on an empty PGDATA, creates the cluster with the POSTGRES_USER superuser
# (password POSTGRES_PASSWORD, scram-sha-256 over TCP) and POSTGRES_DB, as the official image does; then runs "$@".
set -eu
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
  user=${POSTGRES_USER:-postgres}
  db=${POSTGRES_DB:-$user}
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  # Sockets inside the container are trusted (pg_isready, psql via docker exec); every TCP client needs the password.
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8
  rm -f "$pwfile"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  echo 'host all all all scram-sha-256' >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    # Socket only while the database is created, so nothing connects to a half-initialised server.
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
    createdb -U "$user" -O "$user" "$db"
    pg_ctl -D "$PGDATA" -m fast -w stop
  fi
fi
exec "$@"
