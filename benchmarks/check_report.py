"""The whole default audit's report.html as a reader gets it: within its size budget, no external
loads, and, where Debian's chromium is installed, the verdict first, nothing wider than the
screen at 1280 and 500 px, no console errors, every section expanded in print.

    .venv/bin/python benchmarks/check_report.py [RUN_DIR] [--data-dir ../shared/data]

Without RUN_DIR it runs the default audit first (`pytest audits`, offline, into a temporary report
folder; about 9 minutes on a quiet 2-core machine, more on a busy one). The test suite checks a
subset of the audit the same way (tests/test_report_browser.py); the whole audit is here because
it takes an hour of CI beside the other tests. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from bias_core.reports.banner import banner_for_run  # noqa: E402

from headless import HeadlessChromium, chromium_binary  # noqa: E402
from report_checks import SIZE_BUDGET, check_page, external_loads  # noqa: E402


def run_default_audit(report_dir: Path, data_dir: Path | None) -> str:
    args = [sys.executable, "-m", "pytest", "audits", "-p", "no:cacheprovider", "-q", "--report-dir", str(report_dir)]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir)]
    proc = subprocess.run(args, cwd=ROOT, env={**os.environ, "BIAS_CORE_OFFLINE": "1"}, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"the default audit stopped with exit status {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", nargs="?", type=Path, help="a run folder of the default audit (default: run it now)")
    ap.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data",
                    help="the seed papers' data, when the audit is run here (default: ../shared/data)")
    args = ap.parse_args()
    terminal = None
    with tempfile.TemporaryDirectory(prefix="check-report-") as tmp:
        run_dir = args.run_dir
        if run_dir is None:
            terminal = run_default_audit(Path(tmp), args.data_dir if args.data_dir.is_dir() else None)
            [run_dir] = [p for p in Path(tmp).iterdir() if p.is_dir()]
        doc = json.loads((run_dir / "results.json").read_text())
        headline = banner_for_run(doc["results"], doc["run"]).headline
        report = run_dir / "report.html"
        size = report.stat().st_size
        loads = external_loads(report.read_text(encoding="utf-8"))
        checks = [(f"report.html size {size:,} bytes (budget {SIZE_BUDGET:,})", size < SIZE_BUDGET),
                  (f"external loads: {loads or 'none'}", not loads)]
        if terminal is not None:
            checks.append(("the terminal summary opens with the report's banner", f" {headline} " in terminal))
        if chromium_binary() is None:
            checks.append(("browser checks: skipped, chromium is not installed (apt-get install chromium)", True))
        else:
            try:
                with HeadlessChromium() as browser:
                    check_page(browser, report, headline)
                checks.append(("in chromium at 1280 and 500 px and in print: banner first, nothing too wide, no errors",
                               True))
            except AssertionError as exc:
                checks.append((f"in chromium: {exc!r}", False))
        print(f"run {run_dir.name}: {len(doc['results'])} rows, banner {headline!r}")
        for what, ok in checks:
            print(f"| {'ok' if ok else 'FAILED'} | {what} |")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
