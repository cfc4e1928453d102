#!/usr/bin/env bash
# The many-users load test (`cortex-perf --load` on Postgres) with reads on the primary alone,
# then on one hot standby, then on two: each PostgreSQL in a container of its own, capped at
# the same CPU share (`docker run --cpus`); the server and the load's client run on the host.
# Prints one Markdown table (docs/BENCHMARKS.md, "Reads on hot standbys") and keeps each
# run's JSON report in OUT_DIR.
#
#   cargo build --release -p cortex-mcp -p cortex-perf
#   bash scripts/build-images.sh postgres
#   bash scripts/bench-replicas.sh [OUT_DIR]
#
# Settings: PG_CPUS (0.5, each container's share), USERS (100), SESSIONS (4), SECS (60),
# CORTEX_TEST_PG_IMAGE (cortex-pgvector:local). The containers and their network carry the
# label cortex.bench=replicas and are removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-target/bench-replicas}"
image="${CORTEX_TEST_PG_IMAGE:-cortex-pgvector:local}"
cpus="${PG_CPUS:-0.5}"
users="${USERS:-100}"
sessions="${SESSIONS:-4}"
secs="${SECS:-60}"
perf=target/release/cortex-perf
password=bench
run_id="$$"
network="cortex-bench-replicas-$run_id"

[ -x "$perf" ] && [ -x target/release/cortex-mcp ] || {
  echo "bench-replicas: build first: cargo build --release -p cortex-mcp -p cortex-perf" >&2
  exit 1
}
docker image inspect "$image" >/dev/null 2>&1 || {
  echo "bench-replicas: no image $image: bash scripts/build-images.sh postgres" >&2
  exit 1
}
mkdir -p "$out"

cleanup() {
  docker ps -aq --filter "label=cortex.bench=replicas" | xargs -r docker rm -f >/dev/null
  docker network rm "$network" >/dev/null 2>&1 || true
}
trap cleanup EXIT
docker network create --label cortex.bench=replicas "$network" >/dev/null

# start NAME [ENV...]: a PostgreSQL container on the network, its port published on
# loopback; prints its URL from this host once it accepts connections.
start() {
  local name="$1-$run_id"
  shift
  docker run -d --name "$name" --hostname "$name" --network "$network" \
    --label cortex.bench=replicas --cpus "$cpus" -e POSTGRES_PASSWORD="$password" "$@" \
    -p 127.0.0.1::5432 "$image" >/dev/null
  for _ in $(seq 1 120); do
    if docker exec "$name" pg_isready -q -h 127.0.0.1 -U postgres 2>/dev/null; then
      local port
      port="$(docker port "$name" 5432/tcp | head -n 1 | sed 's/.*://')"
      echo "postgres://postgres:$password@127.0.0.1:$port/postgres"
      return 0
    fi
    sleep 1
  done
  docker logs "$name" >&2
  echo "bench-replicas: $name did not start" >&2
  return 1
}

# Each container's CPU use, sampled halfway through a run (docker stats).
sample_cpu() {
  sleep $((secs / 2))
  docker stats --no-stream --format '{{.Name}} {{.CPUPerc}}' \
    $(docker ps -q --filter "label=cortex.bench=replicas") >"$1" 2>/dev/null || true
}

# load NAME [READ_URLS]: one load run, its report in $out/NAME.json.
load() {
  local name="$1" reads="${2:-}"
  local args=(--load --load-backend postgres --postgres "$primary" --load-users "$users"
    --load-sessions "$sessions" --load-secs "$secs" --json "$out/$name.json")
  [ -n "$reads" ] && args+=(--load-read-url "$reads")
  sample_cpu "$out/$name.cpu" &
  echo "== $name" >&2
  "$perf" "${args[@]}" >"$out/$name.log"
  wait
  tail -n 12 "$out/$name.log" >&2
}

primary="$(start primary)"
load primary-alone
standby1="$(start standby1 -e CORTEX_STANDBY_OF="primary-$run_id:5432")"
load one-standby "$standby1"
standby2="$(start standby2 -e CORTEX_STANDBY_OF="primary-$run_id:5432")"
load two-standbys "$standby1,$standby2"

python3 - "$out" "$cpus" <<'EOF'
import json, sys
out, cpus = sys.argv[1], float(sys.argv[2])
tools = ["memorize", "recall", "list_memories", "forget"]
print(f"| reads on | PostgreSQL CPUs | calls/s | " + " | ".join(f"{t} p50 / p99 ms" for t in tools)
      + " | reads on a standby (at once / after a wait) | fell back to the primary | errors | cross-user |")
print("|---|---:|---:|" + "---:|" * len(tools) + "---:|---:|---:|---:|")
for name, label, n in [("primary-alone", "the primary alone", 1),
                       ("one-standby", "one standby", 2), ("two-standbys", "two standbys", 3)]:
    run = json.load(open(f"{out}/{name}.json"))["load"]["run"]
    cells = [f"{run['tools'][t]['p50_ms']:,.0f} / {run['tools'][t]['p99_ms']:,.0f}" for t in tools]
    reads = run["reads"]
    routes = reads["routes"]
    standby = (f"{routes['replica']:,} / {routes['replica_waited']:,}" if reads["total"] else "-")
    fallback = (f"{reads['fallback_share'] * 100:.2f}%" if reads["total"] else "-")
    # "<container>-<run> <cpu%>" per line: the container's role and what it used.
    used = [line.split() for line in open(f"{out}/{name}.cpu") if line.strip()]
    shares = ", ".join(f"{c.rsplit('-', 1)[0]} {p}" for c, p in sorted(used))
    print(f"| {label} | {n} x {cpus:g} ({shares}) | {run['calls_per_s']:,.0f} | "
          + " | ".join(cells) + f" | {standby} | {fallback} | {run['errors']} | {run['cross_user']} |")
EOF
