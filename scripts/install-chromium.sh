#!/usr/bin/env bash
# Make headless Chromium and its WebDriver (chromedriver) available for the web crate's
# browser tests (web/tests/browser.rs).
#
# Idempotent: when `chromium` and `chromedriver` are already on PATH, prints their paths
# and exits. Otherwise, when running as root on Debian, installs Debian's `chromium` and
# `chromium-driver` packages from the machine's configured apt sources (no source is
# added). Anywhere else it fails with a hint.
#
# The last line of the output is the chromedriver path (everything else goes to stderr),
# so `CHROMEDRIVER="$(bash scripts/install-chromium.sh)"` works.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'install-chromium: error: %s\n' "$*" >&2; exit 1; }

have_both() { command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; }

if have_both; then
  log "chromium: $(command -v chromium)"
  command -v chromedriver
  exit 0
fi

[ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1 \
  || die "chromium/chromedriver not on PATH and this is not Debian: install Chromium and a matching chromedriver yourself"
[ "$(id -u)" -eq 0 ] \
  || die "chromium/chromedriver not on PATH: run as root (sudo bash $0) or: apt-get install chromium chromium-driver"

# Refresh the package lists only when apt does not know the packages yet (a fresh image
# has empty lists); the install itself fetches whatever versions the lists name.
if ! apt-cache show chromium chromium-driver >/dev/null 2>&1; then
  log "apt-get update"
  apt-get update -qq
fi

log "Installing chromium and chromium-driver"
if ! apt-get install -y -qq chromium chromium-driver >/dev/null; then
  # Stale package lists (a mirror that no longer holds the named version): refresh, retry.
  log "install failed; apt-get update and retry"
  apt-get update -qq
  apt-get install -y -qq chromium chromium-driver >/dev/null
fi

have_both || die "installed, but chromium/chromedriver are still not on PATH"
log "chromium: $(command -v chromium) ($(chromium --version 2>/dev/null || echo 'version unknown'))"
command -v chromedriver
