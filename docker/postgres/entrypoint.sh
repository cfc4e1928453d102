#!/bin/bash
# The PostgreSQL image's entrypoint: a cluster in PGDATA on first start, then the server in
# the foreground. The settings are those of the images users pull (pgvector/pgvector):
#   POSTGRES_PASSWORD  the superuser's password (required on first start)
#   POSTGRES_USER      the superuser (postgres)
#   POSTGRES_DB        a database made on first start (POSTGRES_USER's name)
# Every network login needs the password (scram-sha-256); replication connections too, so a
# standby can be made from it with pg_basebackup. Extra arguments go to postgres
# (`postgres -c name=value ...`, as with those images).
#
# One setting of this image only:
#   CORTEX_STANDBY_OF  host:port of a primary made by this image: on first start PGDATA is
#                      copied from it (pg_basebackup -R -X stream, as POSTGRES_USER with
#                      POSTGRES_PASSWORD), so the server starts as its hot standby, streaming
#                      from it (standby.signal and primary_conninfo, password included, in
#                      PGDATA) through a physical replication slot made for it on the primary
#                      (standby_<host name>), so the primary keeps every WAL segment the
#                      standby has not received, however busy it is (drop the slot on the
#                      primary when the standby goes for good). A replay delay goes in as
#                      any setting: `postgres -c recovery_min_apply_delay=300ms`.
set -euo pipefail

: "${PGDATA:=/var/lib/postgresql/data}"
user="${POSTGRES_USER:-postgres}"
database="${POSTGRES_DB:-$user}"

if [ "${1:-}" = postgres ]; then
  shift
fi

# The primary may still be starting: wait for it (a minute at most), then copy it.
if [ -n "${CORTEX_STANDBY_OF:-}" ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "cortex-postgres: POSTGRES_PASSWORD is not set; a standby logs in to its primary with it" >&2
    exit 1
  fi
  primary_host="${CORTEX_STANDBY_OF%:*}"
  primary_port="${CORTEX_STANDBY_OF##*:}"
  if [ "$primary_host" = "$CORTEX_STANDBY_OF" ]; then
    primary_port=5432
  fi
  for _ in $(seq 1 60); do
    pg_isready -q -h "$primary_host" -p "$primary_port" -U "$user" && break
    sleep 1
  done
  # The slot first, reserving WAL from now: a busy primary then cannot recycle a segment
  # the copy, or the standby streaming after it, still needs (a slot pg_basebackup makes
  # for itself reserves only once its stream starts, which can be too late).
  slot="standby_$(printf '%s' "${HOSTNAME:-standby}" | tr -c 'a-z0-9_' '_' | cut -c 1-50)"
  export PGPASSWORD="$POSTGRES_PASSWORD"
  psql -X -q -v ON_ERROR_STOP=1 -h "$primary_host" -p "$primary_port" -U "$user" -d postgres \
    -c "SELECT pg_create_physical_replication_slot('$slot', true) WHERE NOT EXISTS
          (SELECT 1 FROM pg_replication_slots WHERE slot_name = '$slot')" >/dev/null
  pg_basebackup -h "$primary_host" -p "$primary_port" -U "$user" -D "$PGDATA" -R \
    -X stream -S "$slot" --checkpoint=fast
  unset PGPASSWORD
  chmod 0700 "$PGDATA"
  echo "cortex-postgres: standby of $primary_host:$primary_port made in $PGDATA" >&2
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
