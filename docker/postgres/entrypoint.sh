#!/bin/bash
# The PostgreSQL image's entrypoint: a cluster in PGDATA on first start, then the server in
# the foreground. The settings are those of the images users pull (pgvector/pgvector):
#   POSTGRES_PASSWORD  the superuser's password (required on first start)
#   POSTGRES_USER      the superuser (postgres)
#   POSTGRES_DB        a database made on first start (POSTGRES_USER's name)
# Every network login needs the password (scram-sha-256); replication connections too, so a
# standby can be made from it with pg_basebackup. Extra arguments go to postgres
# (`postgres -c name=value ...`, as with those images).
set -euo pipefail

: "${PGDATA:=/var/lib/postgresql/data}"
user="${POSTGRES_USER:-postgres}"
database="${POSTGRES_DB:-$user}"

if [ "${1:-}" = postgres ]; then
  shift
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "cortex-postgres: POSTGRES_PASSWORD is not set; the first start needs it" >&2
    exit 1
  fi
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  {
    echo "host all all all scram-sha-256"
    echo "host replication all all scram-sha-256"
  } >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  if [ "$database" != postgres ]; then
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -s -w start >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -U "$user" -d postgres \
      -c "CREATE DATABASE \"${database//\"/\"\"}\""
    pg_ctl -D "$PGDATA" -m fast -s -w stop
  fi
  echo "cortex-postgres: cluster made in $PGDATA (superuser $user, database $database)" >&2
fi

exec postgres -D "$PGDATA" "$@"
