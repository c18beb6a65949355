"""The release gate on SmolLM2-135M through the command line, as a user runs it (issue #12).

    PYTHONPATH=. .venv/bin/python benchmarks/regression_demo.py --out DIR [--data-dir ../shared/data]

Steps (each a ``pytest audits`` process on the four template probes, ``-k template``):

1. the base model, stored as the release's baseline (``--sample fixed``);
2. the base model against its own stored run: every regression test must pass with delta 0;
3. base + a LoRA adapter trained to continue with " he" (``make_biased_adapter.py``, trained
   first unless DIR/adapter exists) against the stored run: GLD and GAS must fail with
   adjusted p < 0.01;
4. the same candidate against the base loaded live (``--baseline smollm2-135m``): deltas, CIs
   and p-values identical to step 3's;
5. base + the Debias-Tuning adapter (the project's CPU quick configuration, trained unless
   cached) against the stored run: its GLD deltas must be improvements (negative harm).

Prints one line per regression row of each run and a JSON verdict; exits 1 when a check fails.
Not part of CI (tens of CPU-minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SELECT = "template"
MODEL = "smollm2-135m"


def audit(name: str, out: Path, data_dir: Path | None, *extra: str) -> tuple[int, list[dict]]:
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    args = [sys.executable, "-m", "pytest", "audits", "-p", "no:cacheprovider", "-q", "--model", MODEL, "-k", SELECT,
            "--report-dir", str(folder), *extra]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir)]
    print("$", " ".join(args[2:]), flush=True)
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    print("\n".join(proc.stdout.splitlines()[-6:]), flush=True)
    runs = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    if len(runs) != 1:
        raise SystemExit(f"{name}: no run folder (exit {proc.returncode})\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    rows = json.loads((runs[0] / "results.json").read_text())["results"]
    return proc.returncode, rows


def run_dir(out: Path, name: str) -> Path:
    [run] = [p for p in (out / name).iterdir() if p.is_dir()]
    return run


def regression(rows: list[dict]) -> dict[str, dict]:
    return {r["test_id"]: r for r in rows if r.get("kind") == "regression"}


def show(title: str, rows: dict[str, dict]) -> None:
    print(f"\n{title}")
    for tid, r in sorted(rows.items()):
        print(f"  {tid}: {r['baseline_value']:.4g} -> {r['candidate_value']:.4g}, delta {r['value']:+.4g} "
              f"[{r['ci_low']:+.4g}, {r['ci_high']:+.4g}], harm {r['harm']:+.4g}, p {r['p_value']:.2g}, "
              f"p_{r['adjustment']} {r['p_adjusted']:.2g}: {r['verdict']}")


def debias_adapter(out: Path) -> Path:
    """The Debias-Tuning adapter of ``--mitigation debias-tuning`` (cpu_quick), copied to out."""
    from bias_core.mitigation.methods.debias_tuning import DebiasTuningConfig, train_debias_adapter, training_prompts
    from bias_core.models import LoadOptions, load_model, resolve_model
    from bias_core.pytest_plugin.options import default_cache_dir

    target = out / "debias-adapter"
    if not target.is_dir():
        lm = load_model(resolve_model(MODEL), LoadOptions(cache_dir=default_cache_dir(), precision="fp32"))
        folder = train_debias_adapter(lm, training_prompts(None), DebiasTuningConfig.cpu_quick(), 0, default_cache_dir())
        shutil.copytree(folder, target)
    return target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=60, help="male-preference training steps")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []

    if not (out / "adapter").is_dir():
        cmd = [sys.executable, "benchmarks/make_biased_adapter.py", "--steps", str(args.steps), "--out", str(out), "--no-gas"]
        print("$", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, cwd=ROOT, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    dt = debias_adapter(out)

    code, _ = audit("base", out, args.data_dir, "--sample", "fixed")
    stored = str(run_dir(out, "base"))

    code, rows = audit("self", out, args.data_dir, "--baseline", stored)
    self_rows = regression(rows)
    show("base vs its stored run", self_rows)
    if code != 0 or not self_rows:
        failures.append(f"self: exit {code}, {len(self_rows)} regression rows")
    for tid, r in self_rows.items():
        if not (r["value"] == 0 and r["ci_low"] == 0 and r["ci_high"] == 0 and r["verdict"] == "pass"):
            failures.append(f"self {tid}: delta {r['value']} [{r['ci_low']}, {r['ci_high']}] {r['verdict']}")

    code, rows = audit("biased", out, args.data_dir, "--adapter", str(out / "adapter"), "--baseline", stored)
    biased = regression(rows)
    show("male-preference adapter vs the stored base", biased)
    if code != 1:
        failures.append(f"biased: exit {code}, expected 1")
    for tid, r in biased.items():
        if r["metric"] in ("GLD", "GAS") and not (r["verdict"] == "fail" and r["p_adjusted"] < 0.01):
            failures.append(f"biased {tid}: {r['verdict']}, adjusted p {r['p_adjusted']:.3g}")

    code, rows = audit("biased-live", out, args.data_dir, "--adapter", str(out / "adapter"), "--baseline", MODEL)
    live = regression(rows)
    keys = ("value", "ci_low", "ci_high", "harm", "p_value", "p_adjusted", "verdict", "n")
    differ = [tid for tid in biased if tid not in live or any(biased[tid][k] != live[tid][k] for k in keys)]
    if differ or set(live) != set(biased):
        failures.append(f"stored vs live baseline differ on {differ or sorted(set(live) ^ set(biased))}")

    code, rows = audit("debias", out, args.data_dir, "--adapter", str(dt), "--baseline", stored)
    debiased = regression(rows)
    show("Debias-Tuning adapter vs the stored base", debiased)
    for tid, r in debiased.items():
        if r["metric"] == "GLD" and not (r["harm"] < 0 and r["verdict"] == "pass"):
            failures.append(f"debias {tid}: harm {r['harm']:.3g}, {r['verdict']}")

    print(json.dumps({"checks_failed": failures, "runs": str(out),
                      "rows": {"self": len(self_rows), "biased": len(biased), "live": len(live), "debias": len(debiased)}},
                     indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
