#!/usr/bin/env bash
# A PostgreSQL server for the tests on this machine, from Debian's packages.
#
# When a server already answers on PGHOST:PGPORT nothing is installed or started: a machine
# that runs PostgreSQL keeps it as it is (only the test database is created if missing).
# Otherwise, as root on Debian or Ubuntu:
#
#   1. `postgresql` (the distribution's supported major) is installed when no server
#      binaries are on the machine;
#   2. a cluster `main` is created on PGPORT when the installed major has none;
#   3. loopback connections are trusted (the test URL carries no password, and the tests
#      log in as roles that do not exist to see that refusal),
#      in a marked block at the top of that cluster's pg_hba.conf (Debian's default asks
#      for a password on TCP);
#   4. the cluster is started and the test database created.
#
# pgvector is scripts/install-pgvector.sh's work, run after this one (scripts/test.sh).
# Idempotent; every step is skipped when its result is already there.
#
# Environment: PGHOST / PGPORT (default 127.0.0.1 / 5432), CORTEX_TEST_DATABASE (test).
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C

PGHOST="${PGHOST:-127.0.0.1}"
PGPORT="${PGPORT:-5432}"
DATABASE="${CORTEX_TEST_DATABASE:-test}"
HBA_MARK="# cortex test: loopback trust for the test server (scripts/install-postgres.sh)"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'install-postgres: error: %s\n' "$*" >&2; exit 1; }

server_up() { pg_isready -q -h "$PGHOST" -p "$PGPORT" 2>/dev/null; }
can_login() { psql -X -q -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -w -tAc 'select 1' >/dev/null 2>&1; }

# The newest major with server binaries on this machine, or nothing.
installed_major() {
  # shellcheck disable=SC2012
  ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sed -E 's#.*/postgresql/([0-9]+)/.*#\1#' \
    | sort -n | tail -n 1 || true
}

install_packages() {
  [ -f /etc/debian_version ] || die "no PostgreSQL answers on $PGHOST:$PGPORT and this is not Debian: start one, or set CORTEX_TEST_DATABASE_URL"
  log "installing Debian's postgresql (no server binaries on this machine)"
  apt-get update -qq
  # ssl-cert: the snakeoil pair the TLS test's server uses (install-pgvector.sh turns TLS on).
  apt-get install -y -qq --no-install-recommends postgresql ssl-cert >/dev/null
}

ensure_cluster() {
  local major="$1"
  if ! pg_lsclusters -h 2>/dev/null | awk -v m="$major" '$1 == m && $2 == "main"' | grep -q .; then
    log "creating cluster $major/main on port $PGPORT"
    pg_createcluster "$major" main --port "$PGPORT" >/dev/null
  fi
}

trust_loopback() {
  local major="$1" hba
  hba="/etc/postgresql/$major/main/pg_hba.conf"
  [ -f "$hba" ] || die "$hba not found"
  grep -qF "$HBA_MARK" "$hba" && return 0
  log "trusting loopback logins in $hba"
  local tmp
  tmp="$(mktemp)"
  {
    echo "$HBA_MARK"
    echo "host    all    all    127.0.0.1/32    trust"
    echo "host    all    all    ::1/128         trust"
    echo
    cat "$hba"
  } >"$tmp"
  install -o postgres -g postgres -m 0640 "$tmp" "$hba"
  rm -f "$tmp"
}

start_cluster() {
  local major="$1" i
  if ! server_up; then
    log "starting cluster $major/main"
    pg_ctlcluster --skip-systemctl-redirect "$major" main start
  else
    pg_ctlcluster --skip-systemctl-redirect "$major" main reload
  fi
  for i in $(seq 1 60); do
    server_up && return 0
    sleep 0.5
  done
  die "PostgreSQL $major/main did not come up on $PGHOST:$PGPORT (see /var/log/postgresql/)"
}

if ! server_up || ! can_login; then
  [ "$(id -u)" -eq 0 ] || die "no PostgreSQL answers on $PGHOST:$PGPORT for postgres without a password, and only root can install and start one: start it yourself, or set CORTEX_TEST_DATABASE_URL"
  major="$(installed_major)"
  if [ -z "$major" ]; then
    install_packages
    major="$(installed_major)"
    [ -n "$major" ] || die "postgresql installed, but no server binaries under /usr/lib/postgresql"
  fi
  ensure_cluster "$major"
  trust_loopback "$major"
  start_cluster "$major"
  can_login || die "PostgreSQL $major answers on $PGHOST:$PGPORT but refuses postgres without a password"
fi

if [ "$(psql -X -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'")" != 1 ]; then
  log "creating database $DATABASE"
  psql -X -q -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$DATABASE\""
fi
log "PostgreSQL answers on $PGHOST:$PGPORT with database $DATABASE"
