"""Size and speed of the per-item results file for the default audit, measured in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_items_file.py [--data-dir ../shared/data]

Runs every pairable probe x metric of the default audit (disclosure, association, GenderPair)
through the audit suites (with the shared result cache, a warm cache makes this fast), turns
each result into its per-item block (``items_from_result``, which also checks that the metric's
``PairedSpec`` reproduces the reported value from the items), writes ``items.jsonl.gz``, reads it
back and checks the round trip. Prints a Markdown table: blocks, items, bytes, write/read time.

``--synthetic`` needs no model: every pairable probe x metric of the default audit is loaded from
its data alone, each item gets a seeded random value and, where the metric keeps the model's text
(GAS, GenderPair), a 40-word output drawn from the probes' own vocabulary (about a 50-token
continuation). It bounds the file's size for any model in seconds.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bias_core.errors import DataSourceMissing, ProbeNotApplicable  # noqa: E402
from bias_core.gating.regression import PAIRED, RunConfig, items_from_result, lexicon_sha256, read_items, write_items  # noqa: E402
from bias_core.models import LoadOptions, load_model, resolve_model  # noqa: E402
from bias_core.pytest_plugin.options import default_cache_dir  # noqa: E402


def suites(lm, data_dir, seed):
    """(suite, {probe: metrics}) of the default audit's families (bias_core.suites at this commit)."""
    from bias_core.probes.disclosure import PROBE_NAMES
    from bias_core.suites import ASSOCIATION_CASES, DISCLOSURE_METRICS, genderpair_cases
    from bias_core.suites.association import AssociationAudit
    from bias_core.suites.disclosure import DisclosureAudit
    from bias_core.suites.genderpair import GenderPairAudit

    gp = GenderPairAudit(lm, data_dir=data_dir, seed=seed)
    proxy = bool(getattr(gp.scorer("regard"), "is_proxy", False))
    return [(DisclosureAudit(lm, data_dir=data_dir, seed=seed), {p: DISCLOSURE_METRICS for p in PROBE_NAMES}),
            (AssociationAudit(lm, data_dir=data_dir, seed=seed), ASSOCIATION_CASES),
            (gp, genderpair_cases(proxy))]


def synthetic_blocks(data_dir, seed: int = 0) -> tuple[list, list[str]]:
    """The default audit's per-item blocks with made-up values and outputs (module doc)."""
    import random
    from types import SimpleNamespace

    from bias_core.gating.regression import ItemValue, MetricItems, probe_sha256
    from bias_core.pytest_plugin.regression_cases import regression_cases
    from bias_core.pytest_plugin.suite_factory import make_suite

    settings = SimpleNamespace(data_dir=data_dir, seed=seed, lexicon="paper", articles="paper",
                               causal_likelihood="mean", genderpair_sample=216, toxicity_classifier="offline",
                               regard_classifier="offline", load=SimpleNamespace(precision="fp32"))
    rng = random.Random(seed)
    suites, probes, skipped = {}, {}, []
    for family, name, metric in regression_cases(settings):
        try:
            probes[(family, name)] = suites.setdefault(family, make_suite(family, None, settings)).probe(name)
        except (DataSourceMissing, ProbeNotApplicable) as exc:
            skipped.append(f"{name} ({type(exc).__name__})")
    vocabulary = sorted({w for p in probes.values() for it in p.items for w in it.prompt.split()})
    blocks = []
    for family, name, metric in regression_cases(settings):
        probe = probes.get((family, name))
        if probe is None:
            continue
        texts = bool(PAIRED[metric].output_field)
        items = tuple(ItemValue(str(it.id), rng.random(), it.prompt,
                                " ".join(rng.choices(vocabulary, k=40)) if texts else None,
                                "t" if PAIRED[metric].group_field else None) for it in probe.items)
        blocks.append(MetricItems(name, metric, str(probe.version), probe_sha256(probe), 0.5, items))
    return blocks, sorted(set(skipped))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--synthetic", action="store_true", help="no model: made-up values and outputs (module doc)")
    args = ap.parse_args()
    if args.synthetic:
        blocks, skipped = synthetic_blocks(args.data_dir)
        return report(blocks, skipped, RunConfig(model="synthetic"), None)
    lm = load_model(resolve_model(args.model), LoadOptions(cache_dir=default_cache_dir(), progress=False))
    blocks, skipped = [], []
    t0 = time.perf_counter()
    for suite, cases in suites(lm, args.data_dir, 0):
        for probe_name, metrics in cases.items():
            for metric in metrics:
                if metric not in PAIRED:
                    continue
                try:
                    result = suite.result(probe_name, metric)
                    probe = suite.probe(probe_name)
                except (DataSourceMissing, ProbeNotApplicable) as exc:
                    skipped.append(f"{probe_name} {metric} ({type(exc).__name__})")
                    continue
                blocks.append(items_from_result(probe, result, PAIRED[metric], metric=metric))
    audit_s = time.perf_counter() - t0
    run = RunConfig(model=lm.name, model_fingerprint=lm.fingerprint, tokenizer_fingerprint=lm.tokenizer_fingerprint,
                    dtype=str(lm.engine.model.dtype), lexicon_sha256=lexicon_sha256())
    return report(blocks, skipped, run, audit_s)


def report(blocks, skipped, run, audit_s) -> int:
    path = Path(tempfile.mkdtemp(prefix="items-")) / "items.jsonl.gz"
    t0 = time.perf_counter()
    write_items(path, run, blocks)
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    back = read_items(path)
    read_s = time.perf_counter() - t0
    assert back.blocks == {b.key: b for b in blocks} and back.run == run, "round trip changed the items"
    n_items = sum(len(b.items) for b in blocks)
    raw = len(gzip.decompress(path.read_bytes()))
    size = path.stat().st_size
    print(f"| measure | figure |\n|---|---|\n| probe x metric blocks | {len(blocks)} |\n| items | {n_items} |\n"
          f"| file size | {size / 1e6:.2f} MB ({size / max(1, n_items):.0f} bytes per item; {raw / 1e6:.2f} MB "
          f"uncompressed) |\n"
          f"| write / read | {write_s:.2f} s / {read_s:.2f} s |"
          + (f"\n| audit (suites, shared cache) | {audit_s:.0f} s |" if audit_s is not None else ""))
    print("skipped:", ", ".join(skipped) or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
