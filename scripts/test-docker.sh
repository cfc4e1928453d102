#!/usr/bin/env bash
# The tests that need a Docker engine (scripts/test.sh runs this after the other suites):
#
#   1. the images, from Debian's packages where no registry serves them
#      (scripts/build-images.sh; each is rebuilt only when its inputs change);
#   2. the Postgres conformance and parity suites through testcontainers, with no
#      CORTEX_TEST_DATABASE_URL, on the image CORTEX_TEST_PG_IMAGE names
#      (cortex-pgvector:local here); and the read-replica suite (backends/postgres/tests/
#      replicas/): a primary and its hot standbys of that image on a network of their own,
#      every suite's reads through a standby, read-your-writes under a replay delay, a
#      standby stopped and cut off under load;
#   3. the compose deployment, driven with the official Python MCP SDK
#      (docker/tests/deployment.py);
#   4. faults between the containers under load (docker/tests/faults.py).
#
# Without a Docker engine it prints one skip line, and fails under CI. The image names,
# the build profile and CARGO_TARGET_DIR are as scripts/build-images.sh reads them.
set -euo pipefail
cd "$(dirname "$0")/.."

ci="${CI:-}"
under_ci() { [ -n "$ci" ] && [ "$ci" != 0 ] && [ "$ci" != false ]; }
# Each step with the seconds since this script began: where the time goes.
step() { printf '== docker: %dm%02ds %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

if ! docker info >/dev/null 2>&1; then
  if under_ci; then
    echo "test-docker: no Docker engine answers (docker info failed), and CI needs one" >&2
    exit 1
  fi
  echo "SKIPPED the Docker tests: no Docker engine answers (docker info failed)"
  exit 0
fi

step "images"
bash scripts/build-images.sh all
export CORTEX_TEST_PG_IMAGE="${CORTEX_TEST_PG_IMAGE:-${CORTEX_POSTGRES_IMAGE:-cortex-pgvector:local}}"
export CORTEX_POSTGRES_IMAGE="${CORTEX_POSTGRES_IMAGE:-cortex-pgvector:local}"
export CORTEX_IMAGE="${CORTEX_IMAGE:-cortex-mcp:local}"

# testcontainers leaves its container running past the test process (the suites label it),
# and the replica suite its network; this removes them whatever happens.
remove_test_containers() {
  local ids
  ids="$(docker ps -aq --filter label=cortex.test=postgres)"
  [ -z "$ids" ] || docker rm -f -v $ids >/dev/null
  ids="$(docker network ls -q --filter label=cortex.test=postgres)"
  [ -z "$ids" ] || docker network rm $ids >/dev/null
}
trap remove_test_containers EXIT

step "conformance + parity + replicas through testcontainers ($CORTEX_TEST_PG_IMAGE)"
# The Postgres suites' binaries from the same workspace-wide build as the other suites
# (nothing is compiled again), each run once as one process, so one container each (the
# replica suite: one primary, and a standby of each kind its tests use).
mapfile -t binaries < <(
  cargo test --workspace --locked --test conformance --test parity --test replicas --no-run \
    --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and "cortex-postgres" in m["package_id"]:
        print(m["executable"])'
)
[ "${#binaries[@]}" = 3 ] || { echo "test-docker: expected the Postgres conformance, parity and replicas binaries, found: ${binaries[*]}" >&2; exit 1; }
passed=0
for binary in "${binaries[@]}"; do
  log="$(mktemp)"
  set +e
  (cd backends/postgres && env -u CORTEX_TEST_DATABASE_URL "$binary" --test-threads 2) 2>&1 \
    | tee "$log"
  status="${PIPESTATUS[0]}"
  set -e
  remove_test_containers
  n="$(sed -nE 's/^test result: ok\. ([0-9]+) passed; 0 failed; 0 ignored.*/\1/p' "$log")"
  skipped="$(grep -c 'SKIPPED' "$log" || true)"
  rm -f "$log"
  if [ "$status" != 0 ] || [ -z "$n" ] || [ "$skipped" != 0 ]; then
    echo "test-docker: $(basename "$binary") failed on the container path (exit $status, $skipped skipped)" >&2
    exit 1
  fi
  echo "testcontainers path: $(basename "$binary"): $n passed, 0 skipped"
  passed=$((passed + n))
done
echo "testcontainers: $passed passed, 0 failed"

bash scripts/setup-python-client.sh >/dev/null
CORTEX_COMPOSE="$(bash scripts/setup-compose.sh)"
export CORTEX_COMPOSE
python=".cache/mcp-venv/bin/python"

step "compose deployment ($CORTEX_COMPOSE)"
(cd docker/tests && "../../$python" deployment.py)

step "faults between containers"
(cd docker/tests && "../../$python" faults.py)
