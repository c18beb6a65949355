#!/usr/bin/env bash
# Runs the tests that compare fp32 computations under each CPU kernel set and thread count where
# their bounds (tests/tolerances.py) could break: ATEN_CPU_CAPABILITY default (AVX-512 where the
# CPU has it) and avx2, 1, 2 and 4 threads (BIAS_CORE_TEST_THREADS for the tiny-model tests,
# OMP_NUM_THREADS for the rest). Prints one line per configuration: the pytest summary, and the
# largest difference as a share of its bound over every comparison made (BIAS_CORE_TOLERANCE_LOG).
#
#   bash benchmarks/fp32_matrix.sh                      # the default set of test files, fast tier
#   bash benchmarks/fp32_matrix.sh tests/test_models.py -m "slow"
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
if [ $# -eq 0 ]; then
    set -- tests/test_models.py tests/test_models_masked.py tests/test_paper_definitions.py tests/test_devices.py \
        tests/test_memory.py tests/test_adapter.py tests/test_mitigation_train.py tests/test_mitigation_compare.py \
        tests/test_objectives.py tests/test_sentence_debias.py tests/test_classifiers.py -m "not slow"
fi
OUT=${FP32_MATRIX_LOGS:-$(mktemp -d)}  # the comparisons of each configuration stay here (JSON lines)
mkdir -p "$OUT"
for cap in default avx2; do
    for threads in 1 2 4; do
        log="$OUT/$cap-$threads.jsonl"
        if [ "$cap" = default ]; then unset ATEN_CPU_CAPABILITY; else export ATEN_CPU_CAPABILITY=$cap; fi
        summary=$(BIAS_CORE_TOLERANCE_LOG="$log" BIAS_CORE_TEST_THREADS=$threads OMP_NUM_THREADS=$threads \
            "$PY" -m pytest -q -p no:cacheprovider "$@" 2>&1 | tail -1)
        worst=$("$PY" - "$log" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])] if __import__("os").path.exists(sys.argv[1]) else []
if not rows:
    print("no comparisons logged")
else:
    r = max(rows, key=lambda r: r["largest"] / r["bound"])
    print(f"{len(rows)} comparisons; largest difference {r['largest'] / r['bound']:.3f} of its bound "
          f"({r['largest']:.3g} of {r['bound']:.3g}, {r['kind']}, {r['test']})")
EOF
)
        echo "ATEN_CPU_CAPABILITY=$cap threads=$threads: $summary; $worst"
    done
done
unset ATEN_CPU_CAPABILITY
echo "comparisons logged in $OUT"
