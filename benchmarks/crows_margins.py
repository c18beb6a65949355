"""How a fine-tune moves CrowS-Pairs' sentence scores pair by pair, not only their count.

    PYTHONPATH=. .venv/bin/python benchmarks/crows_margins.py --data-dir ../shared/data \
        worse=DIR/crows-words/adapter-worse better=DIR/crows-words/adapter-better

crows_stereo counts the pairs whose ``sent_more`` outscores ``sent_less``; a candidate can move
every pair's margin (score(sent_more) - score(sent_less), the joint log-likelihoods the metric
compares) the stereotyped way on average and still leave the count where it was, when it moves
them both ways by more. Prints, for the base model and each adapter, the share counted and the
margins' mean and median size, then each adapter's change of margin: mean, standard deviation and
the share of pairs moved the stereotyped way.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("adapters", nargs="*", help="NAME=ADAPTER_DIR, each compared with the base model")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--data-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    from bias_core.models import LoadOptions, load_model, resolve_model
    from bias_core.probes.crows_pairs import crows_pairs_probe
    from bias_core.pytest_plugin.options import default_cache_dir

    items = crows_pairs_probe(args.data_dir).items
    more, less = [it.meta["sent_more"] for it in items], [it.meta["sent_less"] for it in items]
    margins = {}
    for name, adapter in [("base", None)] + [tuple(a.split("=", 1)) for a in args.adapters]:
        lm = load_model(resolve_model(args.model), LoadOptions(cache_dir=default_cache_dir(), use_cache=False,
                                                               dtype="float32", adapter=adapter))
        margins[name] = lm.sentence_logprob(more) - lm.sentence_logprob(less)
        m = margins[name]
        print(f"{name}: {len(m)} pairs, crows_stereo {100 * np.mean(m > 0):.1f}, mean margin {m.mean():.3f} nats, "
              f"median |margin| {np.median(np.abs(m)):.3f}", flush=True)
    for name, m in margins.items():
        if name != "base":
            d = m - margins["base"]
            print(f"{name} - base: margin change mean {d.mean():+.3f} nats, sd {d.std():.3f}, "
                  f"pairs moved the stereotyped way {np.mean(d > 0):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
