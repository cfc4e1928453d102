#!/usr/bin/env bash
# The many-users load test (`cortex-perf --load` on Postgres) with reads on the primary alone,
# then on one hot standby, then on two: each PostgreSQL in a container of its own, capped at
# the same CPU share (`docker run --cpus`); the server and the load's client run on the host.
# Then, as controls, the primary alone again with the CPU the standbys had added (its cap
# raised to two and to three shares, `docker update --cpus`): what the same CPU does without
# standbys. Prints one Markdown table (docs/BENCHMARKS.md, "Reads on hot standbys") and keeps
# each run's JSON report, log and CPU samples in OUT_DIR.
#
#   cargo build --release -p cortex-mcp -p cortex-perf
#   bash scripts/build-images.sh postgres
#   bash scripts/bench-replicas.sh [OUT_DIR]
#
# Settings: PG_CPUS (0.5, each container's share), USERS (100), SESSIONS (4), SECS (60),
# CORTEX_TEST_PG_IMAGE (cortex-pgvector:local). The containers and their network carry the
# label cortex.bench.run=<this run> and are removed on exit.
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
label="cortex.bench.run=$run_id"
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

sampler=""
cleanup() {
  [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
  docker ps -aq --filter "label=$label" | xargs -r docker rm -f >/dev/null || true
  docker network rm "$network" >/dev/null 2>&1 || true
}
trap cleanup EXIT
docker network create --label "$label" "$network" >/dev/null

# start NAME [ENV...]: a PostgreSQL container on the network, its port published on
# loopback; prints its URL from this host once it accepts connections.
start() {
  local name="$1-$run_id"
  shift
  docker run -d --name "$name" --hostname "$name" --network "$network" --label "$label" \
    --cpus "$cpus" -e POSTGRES_PASSWORD="$password" "$@" -p 127.0.0.1::5432 "$image" \
    >/dev/null || return 1
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

# Each container's CPU use (docker stats), every 10 s from 10 s into the run to its end.
sample_cpu() {
  local file="$1" ids
  : >"$file"
  for _ in $(seq 10 10 $((secs - 5))); do
    sleep 10
    ids="$(docker ps -q --filter "label=$label")"
    [ -n "$ids" ] || continue
    # shellcheck disable=SC2086 # one argument per container id
    docker stats --no-stream --format '{{.Name}} {{.CPUPerc}}' $ids >>"$file" 2>/dev/null || true
  done
}

# load NAME [READ_URLS]: one load run, its report in $out/NAME.json.
load() {
  local name="$1" reads="${2:-}"
  local args=(--load --load-backend postgres --postgres "$primary" --load-users "$users"
    --load-sessions "$sessions" --load-secs "$secs" --json "$out/$name.json")
  [ -n "$reads" ] && args+=(--load-read-url "$reads")
  echo "== $name" >&2
  # The window starts once every session is open, a second or two after the harness.
  sample_cpu "$out/$name.cpu" &
  sampler=$!
  "$perf" "${args[@]}" >"$out/$name.log"
  wait "$sampler" || true
  sampler=""
  tail -n 12 "$out/$name.log" >&2
}

primary="$(start primary)"
load primary-alone
standby1="$(start standby1 -e CORTEX_STANDBY_OF="primary-$run_id:5432")"
load one-standby "$standby1"
standby2="$(start standby2 -e CORTEX_STANDBY_OF="primary-$run_id:5432")"
load two-standbys "$standby1,$standby2"

# The controls: no standby, the primary given the CPU they had. Their slots go with them.
docker rm -f "standby1-$run_id" "standby2-$run_id" >/dev/null
docker exec "primary-$run_id" psql -X -q -U postgres -d postgres -c \
  "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active" \
  >/dev/null || true
for n in 2 3; do
  docker update --cpus "$(python3 -c "print($n * $cpus)")" "primary-$run_id" >/dev/null
  load "primary-alone-x$n"
done

python3 - "$out" "$cpus" <<'EOF'
import json, sys
from collections import defaultdict
out, cpus = sys.argv[1], float(sys.argv[2])
tools = ["memorize", "recall", "list_memories", "forget"]
print("| reads on | PostgreSQL CPU: cap; used (mean of samples) | calls/s | "
      + " | ".join(f"{t} p50 / p99 ms" for t in tools)
      + " | store reads on a standby: at once / after the wait"
      + " | on the primary: the wait ran out / no standby served / a standby failed"
      + " | errors / cross-user |")
print("|---|---|---:|" + "---:|" * len(tools) + "---:|---:|---:|")
runs = [("primary-alone", "the primary alone", f"1 x {cpus:g}"),
        ("one-standby", "one standby", f"2 x {cpus:g}"),
        ("two-standbys", "two standbys", f"3 x {cpus:g}"),
        ("primary-alone-x2", "the primary alone (control)", f"1 x {2 * cpus:g}"),
        ("primary-alone-x3", "the primary alone (control)", f"1 x {3 * cpus:g}")]
for name, label, cap in runs:
    with open(f"{out}/{name}.json") as f:
        run = json.load(f)["load"]["run"]
    cells = []
    for t in tools:
        row = run["tools"][t]
        cells.append(f"{row['p50_ms'] or 0:,.0f} / {row['p99_ms'] or 0:,.0f}")
    # "<container>-<run> <cpu%>" per line, several samples a container.
    used = defaultdict(list)
    with open(f"{out}/{name}.cpu") as f:
        for line in f:
            if line.strip():
                container, share = line.split()
                used[container.rsplit("-", 1)[0]].append(float(share.rstrip("%")))
    shares = ", ".join(f"{c} {sum(v) / len(v):.0f}%" for c, v in sorted(used.items()))
    reads = run["reads"]
    r = reads["routes"]
    total = reads["total"]
    pct = lambda n: f"{100 * n / total:.1f}%"
    standby = f"{r['replica']:,} / {r['replica_waited']:,}" if total else "-"
    primary = (f"{pct(r['primary_wait_expired'])} / {pct(r['primary_no_replica'])} / "
               f"{pct(r['primary_failover'])}" if total else "-")
    print(f"| {label} | {cap}; {shares} | {run['calls_per_s']:,.0f} | " + " | ".join(cells)
          + f" | {standby} | {primary} | {run['errors']} / {run['cross_user']} |")
EOF
