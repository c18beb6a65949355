#!/usr/bin/env bash
# Issue 22's "What must be shown": the README's test command, on a fresh clone of one commit,
# three times in a row: plainly, beside two CPU hogs (one per core, started and ended here, for
# the whole run), and with ATEN_CPU_CAPABILITY=avx2 (the kernels of a CPU without AVX-512).
# Each run prints one results line (and appends it to --results FILE): passed, failed, skipped
# and error counts, wall time, exit code, the load average before it started.
#
#   bash benchmarks/suite_runs.sh                                   # HEAD, all three runs (~1.5 h)
#   bash benchmarks/suite_runs.sh --commit abc123 --results benchmarks/suite_runs.txt
#   bash benchmarks/suite_runs.sh --runs plain -- tests/test_stats.py -n 2    # a subset, to try it
#
# The arguments after -- replace the README's `tests -n 2`. Each run sets up its own clone
# (scripts/setup.sh --dev, ~1-2 min, from pip's cache); the seed papers' data is found beside
# the repository given (../shared/data) or at BIAS_CORE_SHARED_DATA.
set -uo pipefail

SOURCE=$(cd "$(dirname "$0")/.." && pwd)
COMMIT=HEAD
RUNS=plain,hogs,avx2
RESULTS=""
while [ $# -gt 0 ]; do
    case "$1" in
        --commit) COMMIT=$2; shift 2 ;;
        --repo) SOURCE=$2; shift 2 ;;
        --runs) RUNS=$2; shift 2 ;;
        --results) RESULTS=$2; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
PYTEST_ARGS=("$@")
[ ${#PYTEST_ARGS[@]} -gt 0 ] || PYTEST_ARGS=(tests -n 2)
REV=$(git -C "$SOURCE" rev-parse --verify "$COMMIT^{commit}") || { echo "no commit $COMMIT in $SOURCE" >&2; exit 2; }
SHARED_DATA=${BIAS_CORE_SHARED_DATA:-$SOURCE/../shared/data}
[ -d "$SHARED_DATA" ] && SHARED_DATA=$(cd "$SHARED_DATA" && pwd) || echo "note: no seed papers' data at $SHARED_DATA: its tests will skip" >&2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/suite-runs-XXXXXX")
echo "commit ${REV:0:12}; runs: $RUNS; command: pytest ${PYTEST_ARGS[*]}; work and logs in $WORK" >&2

HOGS=()
stop_hogs() {
    for pid in "${HOGS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    HOGS=()
}
trap stop_hogs EXIT INT TERM

report() {
    echo "$1"
    if [ -n "$RESULTS" ]; then echo "$1" >> "$RESULTS"; fi
}

count() {  # count WORD SUMMARY: the number before WORD in pytest's last line, 0 if absent
    local n
    n=$(grep -oE "[0-9]+ $1" <<<"$2" | tail -1 | cut -d' ' -f1)
    echo "${n:-0}"
}

for run in ${RUNS//,/ }; do
    case "$run" in plain|hogs|avx2) ;; *) echo "unknown run '$run' (plain, hogs, avx2)" >&2; exit 2 ;; esac
    clone="$WORK/$run"
    git clone --quiet "$SOURCE" "$clone" && git -C "$clone" checkout --quiet "$REV" || { echo "clone failed" >&2; exit 1; }
    if ! (cd "$clone" && bash scripts/setup.sh --dev > "$WORK/$run-setup.log" 2>&1); then
        report "$(date -Iseconds) ${REV:0:12} $run: setup failed, see $WORK/$run-setup.log"
        continue
    fi
    env_run=(env BIAS_CORE_SHARED_DATA="$SHARED_DATA")
    [ "$run" = avx2 ] && env_run+=(ATEN_CPU_CAPABILITY=avx2)
    if [ "$run" = hogs ]; then
        for _ in 1 2; do python3 -c "while True: pass" & HOGS+=($!); done
    fi
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    start=$(date +%s)
    (cd "$clone" && "${env_run[@]}" .venv/bin/python -m pytest "${PYTEST_ARGS[@]}" > "$WORK/$run.log" 2>&1)
    code=$?
    wall=$(( $(date +%s) - start ))
    stop_hogs
    summary=$(grep -E "(passed|failed|error|skipped|no tests ran).* in [0-9.]+s" "$WORK/$run.log" | tail -1)
    report "$(date -Iseconds) ${REV:0:12} $run: $(count passed "$summary") passed, $(count failed "$summary") failed, \
$(count skipped "$summary") skipped, $(count error "$summary") errors; wall $((wall / 60)) min $((wall % 60)) s; \
exit $code; load before $load; pytest ${PYTEST_ARGS[*]}; log $WORK/$run.log"
done
