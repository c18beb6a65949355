#!/usr/bin/env bash
# GPU smoke run and benchmark of issue #9 (benchmarks/bench_gpu.py says what each stage does).
#
#   benchmarks/gpu_smoke.sh [--data-dir DIR] [--tokenizer-dir DIR] [--stages build,tests,...]
#   benchmarks/gpu_smoke.sh --tiny      # CPU, tiny model: checks the script itself
#
# Offline GPU machines: put the wheels the machine lacks in .whl/ (git-ignored), e.g.
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_24_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl \
#     bitsandbytes==0.50.2 gguf vaderSentiment==3.3.2 toxic-comment-classifier==0.3.0 pytest-html pytest-metadata
# and the SmolLM2 tokenizer files (tokenizer.json, tokenizer_config.json) in a folder given
# with --tokenizer-dir. The project itself runs from this checkout (PYTHONPATH), no install.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" > /dev/null; then
    SITE="$(mktemp -d)"
    "$PY" -m pip install -q --no-index --no-deps --target "$SITE" .whl/*.whl
    export PYTHONPATH="$SITE:$PYTHONPATH"
fi
exec "$PY" benchmarks/bench_gpu.py "$@"
