#!/usr/bin/env bash
# The images the Docker paths need, built from Debian's packages on a machine whose Docker
# engine can pull nothing (no registry):
#
#   cortex-debian:CODENAME   a Debian base image: debootstrap (minbase, ca-certificates) into
#                            a folder, then `docker import`; CODENAME is this machine's, so
#                            the binaries built here find the C library they were linked to
#   cortex-pgvector:local    Debian's PostgreSQL with pgvector, built by
#                            scripts/install-pgvector.sh (docker/postgres/)
#   cortex-mcp:local         the server: the Dockerfile's `prebuilt` target, with the
#                            binaries the workspace build made and the local model
#
#   scripts/build-images.sh [base|postgres|server|all]      (all by default)
#
# Each image carries a label `cortex.inputs`, a digest of what it is made from (the recipe,
# the base image's id, the files copied in); an image is built only when it is missing or
# that digest changed, and the image it replaces is removed.
#
# Environment:
#   CORTEX_BUILD_PROFILE   debug (default: what `cargo build --workspace` makes) or release;
#                          the binaries are taken from CARGO_TARGET_DIR (target/), and
#                          built with cargo when they are not there
#   CORTEX_DEBIAN_IMAGE / CORTEX_POSTGRES_IMAGE / CORTEX_IMAGE   the images' names
# Needs root (debootstrap), a Debian machine and a Docker engine.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=lib/apt-archive.sh
. scripts/lib/apt-archive.sh

codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
profile="${CORTEX_BUILD_PROFILE:-debug}"
base_image="${CORTEX_DEBIAN_IMAGE:-cortex-debian:$codename}"
postgres_image="${CORTEX_POSTGRES_IMAGE:-cortex-pgvector:local}"
server_image="${CORTEX_IMAGE:-cortex-mcp:local}"
work="$root/target/docker"

log() { printf '==> build-images: %s\n' "$*" >&2; }
die() { printf 'build-images: error: %s\n' "$*" >&2; exit 1; }

[ -n "$codename" ] || die "cannot read this machine's Debian codename from /etc/os-release"
docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed)"

# sha256 of everything on standard input.
digest() { sha256sum | cut -d' ' -f1; }

# The digest an existing image was built from, or nothing.
built_from() { docker image inspect -f '{{ index .Config.Labels "cortex.inputs" }}' "$1" 2>/dev/null || true; }

image_id() { docker image inspect -f '{{ .Id }}' "$1"; }

# After a rebuild: the image that lost its tag, if nothing else uses it.
prune() {
  docker image prune -f --filter "label=cortex.inputs" >/dev/null 2>&1 || true
}

build_base() {
  local recipe inputs rootfs found uri
  found="$(apt_archive "$codename")" || die "no Debian archive for $codename in this machine's apt sources"
  uri="${found%%$'\t'*}"
  recipe="debootstrap --variant=minbase --include=ca-certificates $codename $uri"
  inputs="$(printf '%s\n' "$recipe" | digest)"
  if [ "$(built_from "$base_image")" = "$inputs" ]; then
    log "$base_image is current"
    return
  fi
  [ "$(id -u)" = 0 ] || die "debootstrap needs root to build $base_image (run as root, or build it once elsewhere)"
  command -v debootstrap >/dev/null || {
    log "installing debootstrap"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  }
  rootfs="$work/rootfs"
  rm -rf "$rootfs"
  mkdir -p "$rootfs"
  log "debootstrap $codename into $rootfs (from the archive this machine's apt uses)"
  debootstrap --variant=minbase --include=ca-certificates "$codename" "$rootfs" "$uri" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  log "docker import $base_image"
  tar -C "$rootfs" -c . | docker import \
    --change "LABEL cortex.inputs=$inputs" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$base_image" >/dev/null
  rm -rf "$rootfs"
  prune
}

build_postgres() {
  local context inputs
  context="$work/postgres"
  rm -rf "$context"
  mkdir -p "$context/lib"
  cp docker/postgres/Dockerfile docker/postgres/entrypoint.sh scripts/install-pgvector.sh "$context/"
  cp scripts/lib/apt-archive.sh "$context/lib/"
  inputs="$( (image_id "$base_image"; cd "$context" && find . -type f | sort | xargs sha256sum) | digest)"
  if [ "$(built_from "$postgres_image")" = "$inputs" ]; then
    log "$postgres_image is current"
    return
  fi
  log "building $postgres_image (Debian's PostgreSQL, pgvector by scripts/install-pgvector.sh)"
  docker build -q --build-arg "BASE=$base_image" --label "cortex.inputs=$inputs" \
    -t "$postgres_image" "$context" >/dev/null
  prune
}

build_server() {
  local context inputs model bin
  bin="${CARGO_TARGET_DIR:-target}/$profile"
  if [ ! -x "$bin/cortex-mcp" ] || [ ! -x "$bin/cortex" ]; then
    log "no $bin/cortex-mcp or $bin/cortex: building them"
    if [ "$profile" = release ]; then
      cargo build --locked --release -p cortex-mcp -p cortex-cli
    else
      cargo build --locked -p cortex-mcp -p cortex-cli
    fi
  fi
  model="$(bash scripts/fetch-mpnet-model.sh)"
  context="$work/server"
  rm -rf "$context"
  mkdir -p "$context/bin" "$context/model"
  # Hard links where the file system allows: the debug binaries are large.
  cp -l "$bin/cortex-mcp" "$bin/cortex" "$context/bin/" 2>/dev/null \
    || cp "$bin/cortex-mcp" "$bin/cortex" "$context/bin/"
  cp -rL "$model/." "$context/model/"
  cp Dockerfile "$context/Dockerfile"
  inputs="$( (image_id "$base_image"; cd "$context" && find . -type f | sort | xargs sha256sum) | digest)"
  if [ "$(built_from "$server_image")" = "$inputs" ]; then
    log "$server_image is current"
    return
  fi
  log "building $server_image from $bin (Dockerfile --target prebuilt)"
  docker build -q --target prebuilt --build-arg "RUNTIME_BASE=$base_image" \
    --label "cortex.inputs=$inputs" -t "$server_image" "$context" >/dev/null
  prune
}

mkdir -p "$work"
what="${1:-all}"
case "$what" in
  base) build_base ;;
  postgres) build_base; build_postgres ;;
  server) build_base; build_server ;;
  all) build_base; build_postgres; build_server ;;
  *) die "usage: build-images.sh [base|postgres|server|all]" ;;
esac
log "ready: $(docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' \
  | grep -E "^(${base_image}|${postgres_image}|${server_image}) " | tr '\n' ';')"
