#!/usr/bin/env bash
# Install the pgvector extension (0.8.x) into the local PostgreSQL server.
#
# Debian bookworm does not package pgvector, so this builds it from Debian's
# own *source* package `pgvector` of the `trixie` suite:
#
#   1. A private deb-src-only apt source (trixie, main) is added, reusing the
#      archive URI that this machine's apt sources already point at (discovered
#      at runtime -- no host name is hard-coded here). Being deb-src only, it
#      can never cause binary packages from trixie to be installed.
#   2. `apt-get source pgvector/trixie` fetches it into <repo>/.cache/pgvector/.
#   3. It is built and installed with the running server's pg_config.
#      OPTFLAGS="" is passed so the build does NOT use -march=native: the
#      resulting library is portable (same choice Debian's own package makes).
#   4. `CREATE EXTENSION IF NOT EXISTS vector` is run in the `test` and
#      `postgres` databases.
#   5. TLS is turned on when the server has it off (the Postgres TLS test needs a
#      server that offers it), with Debian's self-signed "snakeoil" certificate.
#
# Idempotent: if vector.control (0.8.x) is already installed the build is
# skipped; only the "ensure running + create extension" steps run again.
#
# `--build-only` stops after the build and install (no server is started or touched): the
# PostgreSQL image of scripts/build-images.sh builds the same pgvector this way.
#
# Must run as root (CI runs as root). Environment overrides:
#   PGVECTOR_CACHE_DIR  work directory (default: <repo>/.cache/pgvector)
#   PGHOST / PGPORT     server address (default: 127.0.0.1 / 5432)
#   PGVECTOR_DATABASES  databases to enable the extension in (default: "test postgres")
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C

WANT_SERIES="0.8"
SRC_SUITE="trixie"
SRC_LIST="/etc/apt/sources.list.d/cortex-trixie-src.sources"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
CACHE_DIR="${PGVECTOR_CACHE_DIR:-$REPO_ROOT/.cache/pgvector}"

PGHOST="${PGHOST:-127.0.0.1}"
PGPORT="${PGPORT:-5432}"
DATABASES="${PGVECTOR_DATABASES:-test postgres}"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'install-pgvector: error: %s\n' "$*" >&2; exit 1; }

BUILD_ONLY=0
case "${1:-}" in
  --build-only) BUILD_ONLY=1 ;;
  "") ;;
  *) die "usage: install-pgvector.sh [--build-only]" ;;
esac

[ "$(id -u)" -eq 0 ] || die "must run as root"

psql_pg() {
  psql -X -q -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U postgres "$@"
}

server_up() { pg_isready -q -h "$PGHOST" -p "$PGPORT"; }

# --- PostgreSQL major version ----------------------------------------------
# Prefer the running server; otherwise the highest configured cluster or installed server.
detect_major() {
  local num
  if [ "$BUILD_ONLY" = 0 ] && server_up && num="$(psql_pg -d postgres -tAc 'show server_version_num' 2>/dev/null)" \
     && [ -n "$num" ]; then
    echo $((num / 10000))
    return
  fi
  # shellcheck disable=SC2012
  { ls /etc/postgresql 2>/dev/null; ls /usr/lib/postgresql 2>/dev/null; } \
    | grep -E '^[0-9]+$' | sort -n | tail -n 1 || true
}

PG_MAJOR="$(detect_major)"
[ -n "$PG_MAJOR" ] || die "cannot determine the PostgreSQL major version"
PG_CONFIG="/usr/lib/postgresql/$PG_MAJOR/bin/pg_config"
[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found (is postgresql-$PG_MAJOR installed?)"
log "PostgreSQL major version: $PG_MAJOR ($PG_CONFIG)"

ensure_running() {
  server_up && return 0
  log "PostgreSQL not accepting connections on $PGHOST:$PGPORT; starting cluster $PG_MAJOR/main"
  pg_ctlcluster --skip-systemctl-redirect "$PG_MAJOR" main start || true
  local i
  for i in $(seq 1 30); do
    server_up && return 0
    sleep 1
  done
  die "PostgreSQL did not come up on $PGHOST:$PGPORT"
}

# --- Already installed? ----------------------------------------------------
installed_version() {
  local control
  control="$("$PG_CONFIG" --sharedir)/extension/vector.control"
  [ -f "$control" ] || return 0
  sed -nE "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'([^']*)'.*/\1/p" "$control" | head -n 1
}

is_wanted_version() {
  case "$1" in "$WANT_SERIES".*) return 0 ;; *) return 1 ;; esac
}

# The Debian archive URI this machine already uses (apt_archive in lib/apt-archive.sh).
# shellcheck source=lib/apt-archive.sh
. "$SCRIPT_DIR/lib/apt-archive.sh"
discover_archive() {
  local codename
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
  [ -n "$codename" ] || codename="$(lsb_release -sc 2>/dev/null || true)"
  [ -n "$codename" ] || die "cannot determine the distribution codename"
  apt_archive "$codename" "$SRC_LIST"
}

write_src_list() {
  local found uri signed tmp
  found="$(discover_archive)" || die "could not find the Debian archive URI in the apt sources"
  uri="${found%%$'\t'*}"
  signed="${found#*$'\t'}"
  if [ -z "$signed" ] && [ -f /usr/share/keyrings/debian-archive-keyring.gpg ]; then
    signed=/usr/share/keyrings/debian-archive-keyring.gpg
  fi
  log "Using archive URI from existing apt sources for $SRC_SUITE deb-src"

  tmp="$(mktemp)"
  {
    echo "# Managed by scripts/install-pgvector.sh: $SRC_SUITE SOURCE packages only"
    echo "# (deb-src), used to build pgvector. No binary packages come from here."
    echo "Types: deb-src"
    echo "URIs: $uri"
    echo "Suites: $SRC_SUITE"
    echo "Components: main"
    if [ -n "$signed" ]; then echo "Signed-By: $signed"; fi
  } >"$tmp"
  if ! cmp -s "$tmp" "$SRC_LIST" 2>/dev/null; then
    install -m 0644 "$tmp" "$SRC_LIST"
  fi
  rm -f "$tmp"
}

missing_pkgs() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

build_and_install() {
  local start end pkgs srcdir
  start=$(date +%s)

  write_src_list
  log "apt-get update"
  apt-get update -qq

  # shellcheck disable=SC2207
  pkgs=($(missing_pkgs "postgresql-server-dev-$PG_MAJOR" build-essential gcc make dpkg-dev))
  if [ "${#pkgs[@]}" -gt 0 ]; then
    log "Installing build dependencies: ${pkgs[*]}"
    apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  fi

  log "Fetching the $SRC_SUITE source package pgvector into $CACHE_DIR"
  mkdir -p "$CACHE_DIR"
  rm -rf "$CACHE_DIR/src" "$CACHE_DIR"/pgvector_* "$CACHE_DIR/dpkg-source.log"
  (
    cd "$CACHE_DIR"
    # The download runs as root: the cache dir is not writable by _apt.
    apt-get source -qq --download-only -o APT::Sandbox::User=root "pgvector/$SRC_SUITE"
    dsc="$(ls pgvector_*.dsc | head -n 1)"
    # apt already verified these files against the signed Release file; the
    # .dsc's own maintainer signature can't be checked without debian-keyring,
    # so dpkg-source's (harmless) gpgv warnings are only shown on failure.
    if ! dpkg-source -x "$dsc" src >dpkg-source.log 2>&1; then
      cat dpkg-source.log >&2
      exit 1
    fi
  )
  srcdir="$CACHE_DIR/src"
  [ -f "$srcdir/vector.control" ] || die "unexpected source layout in $srcdir"
  local srcver
  srcver="$(sed -nE "s/^default_version[[:space:]]*=[[:space:]]*'([^']*)'.*/\1/p" "$srcdir/vector.control")"
  is_wanted_version "$srcver" || die "$SRC_SUITE ships pgvector $srcver, expected $WANT_SERIES.x"

  log "Building pgvector $srcver against $PG_CONFIG (OPTFLAGS=\"\", no -march=native)"
  make -C "$srcdir" -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" >/dev/null
  make -C "$srcdir" -s PG_CONFIG="$PG_CONFIG" OPTFLAGS="" install >/dev/null

  end=$(date +%s)
  log "pgvector $srcver built and installed in $((end - start))s"
}

current="$(installed_version)"
if [ -n "$current" ] && is_wanted_version "$current" \
   && [ -f "$("$PG_CONFIG" --pkglibdir)/vector.so" ]; then
  log "pgvector $current already installed for PostgreSQL $PG_MAJOR; skipping build"
else
  build_and_install
fi

[ "$BUILD_ONLY" = 1 ] && exit 0

ensure_running

# --- TLS -------------------------------------------------------------------
# Debian's cluster usually has ssl = on with the snakeoil pair already; this only
# acts where it is off, and then needs the pair (make-ssl-cert from ssl-cert makes it).
ensure_tls() {
  local cert=/etc/ssl/certs/ssl-cert-snakeoil.pem key=/etc/ssl/private/ssl-cert-snakeoil.key
  [ "$(psql_pg -d postgres -tAc 'SHOW ssl')" = on ] && return 0
  if [ ! -f "$cert" ] || [ ! -f "$key" ]; then
    command -v make-ssl-cert >/dev/null \
      || die "TLS is off and there is no snakeoil certificate (install ssl-cert)"
    make-ssl-cert generate-default-snakeoil
  fi
  log "turning TLS on with the snakeoil certificate"
  psql_pg -d postgres -c "ALTER SYSTEM SET ssl_cert_file = '$cert'" \
                      -c "ALTER SYSTEM SET ssl_key_file = '$key'" \
                      -c "ALTER SYSTEM SET ssl = on" \
                      -c "SELECT pg_reload_conf()" >/dev/null
  # The reload reaches new sessions once the postmaster has handled it.
  local i
  for i in $(seq 1 20); do
    [ "$(psql_pg -d postgres -tAc 'SHOW ssl')" = on ] && return 0
    sleep 0.5
  done
  die "TLS is still off (can the server read $key?)"
}
ensure_tls

for db in $DATABASES; do
  if [ "$(psql_pg -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]; then
    log "database $db does not exist; skipping"
    continue
  fi
  psql_pg -d "$db" -c 'SET client_min_messages = warning' \
                   -c 'CREATE EXTENSION IF NOT EXISTS vector' \
                   -c 'ALTER EXTENSION vector UPDATE'
  ver="$(psql_pg -d "$db" -tAc "SELECT extversion FROM pg_extension WHERE extname = 'vector'")"
  echo "pgvector extension version in database $db: $ver"
done
