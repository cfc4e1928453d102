#!/usr/bin/env bash
# Creates .cache/mcp-venv with the official Python MCP SDK, pinned in
# mcp/tests/e2e/requirements.txt, for the end-to-end client test of cortex-mcp
# (mcp/tests/external_client.rs). Idempotent: does nothing when the virtualenv already
# matches the requirements. Uses only `python3 -m venv` and pip.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.cache/mcp-venv"
requirements="$root/mcp/tests/e2e/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"

if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
    && "$venv/bin/python" -c 'import mcp, httpx2' 2>/dev/null; then
    exit 0
fi

if ! command -v python3 >/dev/null; then
    echo "setup-python-client: python3 is not installed" >&2
    exit 1
fi

# Start clean: a half-built or outdated environment is cheaper to replace than to repair.
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
if ! python3 -m venv "$venv" >/dev/null; then
    echo "setup-python-client: 'python3 -m venv' failed; on Debian/Ubuntu install python3-venv" >&2
    exit 1
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --requirement "$requirements"
echo "$want" > "$stamp"
echo "setup-python-client: $("$venv/bin/python" -m pip show mcp 2>/dev/null | sed -n 's/^Version: /mcp /p') ready in .cache/mcp-venv"
