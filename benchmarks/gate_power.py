"""The smallest regression each release-gate row detects, from a stored run's own items.

    python benchmarks/gate_power.py RUN_DIR [--thresholds thresholds.toml] [--sims 100]
        [--churn 0 1] [--power 0.8] [--markdown FILE] [-k SUBSTRING]

RUN_DIR is a run folder (an audit made with ``--sample fixed``, as a stored baseline is). For each
probe x metric it holds with a regression margin, simulated candidates are made from the run's
item values with a regression of growing size and judged by the gate's own statistics
(``bias_core/gating/regression/power.py``: the model of a candidate, churn 0 and 1). A row is
marked "below" where its margin is less than half of what it detects with probability --power
at the first churn given: a regression of twice the margin then passes unnoticed more often than
1 - --power, so the margin promises more than the row's items can hold.
Prints a Markdown table (and writes it to --markdown); no model is loaded.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bias_core.gating.regression import PAIRED, locate_items, pair, parse_regression_margins, read_items  # noqa: E402
from bias_core.gating.regression.power import detectable  # noqa: E402
from bias_core.reports.fmt import sig  # noqa: E402


def rows(run: Path, thresholds: Path, sims: int, churns: list[float], power: float, select: str = "") -> list[dict]:
    items = read_items(locate_items(run))
    margins = parse_regression_margins(tomllib.loads(thresholds.read_text())["regression"])
    out = []
    for (probe, metric), block in sorted(items.blocks.items()):
        if metric not in margins or metric not in PAIRED or select not in f"{probe}-{metric}":
            continue
        paired = pair(block, block)
        found = {c: detectable(paired, PAIRED[metric], margins[metric], churn=c, power=power, sims=sims) for c in churns}
        first = found[churns[0]]
        out.append({"row": f"{probe}-{metric}", "n": first.n, "margin": first.margin, "baseline": block.value,
                    "effects": {c: d.effect for c, d in found.items()},
                    "below": first.effect is None or first.effect > 2 * first.margin,
                    "points": {c: d.points for c, d in found.items()}})
    return out


def table(found: list[dict], churns: list[float], power: float) -> str:
    head = ("| row | n | baseline | margin | " + " | ".join(f"detected ({100 * power:g}%), churn {c:g}" for c in churns)
            + " | margin below it? |")
    lines = [head, "|" + "---|" * (5 + len(churns))]
    for r in found:
        cells = [("beyond reach" if e is None else sig(e, 3)) for e in r["effects"].values()]
        lines.append(f"| {r['row']} | {r['n']} | {sig(r['baseline'], 3)} | {sig(r['margin'], 3)} | " + " | ".join(cells)
                     + f" | {'**below**' if r['below'] else 'no'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--thresholds", type=Path, default=REPO / "thresholds.toml")
    ap.add_argument("--sims", type=int, default=100)
    ap.add_argument("--churn", type=float, nargs="+", default=[0.0, 1.0])
    ap.add_argument("--power", type=float, default=0.8)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("-k", default="", help="only rows whose probe-metric contains this")
    args = ap.parse_args(argv)
    start = time.monotonic()
    found = rows(args.run, args.thresholds, args.sims, args.churn, args.power, args.k)
    text = table(found, args.churn, args.power)
    took = f"{len(found)} rows, {args.sims} simulations per step, {time.monotonic() - start:.0f} s"
    print(text + "\n\n" + took)
    if args.markdown:
        args.markdown.write_text(text + "\n\n" + took + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
