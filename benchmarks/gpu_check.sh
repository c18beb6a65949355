#!/usr/bin/env bash
# The GPU check of issue 34 in one call (benchmarks/gpu_check.py says what each stage does).
#
#   benchmarks/gpu_pack.sh                  # here, once: .gpu-carry/ (git-ignored), what the GPU machine lacks
#   benchmarks/gpu_check.sh [--budget 450]  # there, with .gpu-carry carried; figures under $OUT
#   benchmarks/gpu_check.sh --tiny          # here, on CPU: checks the script end to end
#
# The project runs from this checkout (PYTHONPATH), no install. .gpu-carry/site.tar.gz holds the
# packages the GPU image lacks (and the packaged data files the default audit reads), unpacked
# into a temporary folder; .gpu-carry/tokenizer/ the SmolLM2 tokenizer files.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
args=("$@")
if [ -f .gpu-carry/site.tar.gz ] && [[ " $* " != *" --tiny "* ]]; then
    SITE="$(mktemp -d)"
    tar -xzf .gpu-carry/site.tar.gz -C "$SITE"
    export PYTHONPATH="$SITE:$PYTHONPATH"
fi
if [ -d .gpu-carry/tokenizer ] && [[ " $* " != *" --tokenizer-dir "* ]]; then
    args+=(--tokenizer-dir .gpu-carry/tokenizer)
fi
exec "$PY" benchmarks/gpu_check.py "${args[@]}"
