"""Check our CrowS-Pairs numbers against lm-evaluation-harness on the same model and dtype.

    OMP_NUM_THREADS=1 python benchmarks/check_crows_fidelity.py [--data-dir ../shared/data]
        [--model smollm2-135m] [--batch-size 16] [--tol 1e-3]

lm-eval's ``crows_pairs_english_gender`` task is built by lm-eval itself from its registered
yaml (doc_to_text, doc_to_choice, target_delimiter, process_docs=filter_gender,
process_results), with only the dataset swapped for the local CSV: its hub copy cannot be
fetched offline. Its requests are scored by ``lm_eval.models.huggingface.HFLM`` on the model's
local folder in float32 on CPU and turned into ``pct_stereotype`` by its own process_results.
Our side is ``bias_core``'s probe loader, ``CausalLM.sentence_logprob`` and ``crows_score``.

Prints the largest |log-likelihood difference| over the 524 sentences, how many of the 262
pair decisions agree, and both pct_stereotype values. Exit status: 0 when every decision agrees
and every log-likelihood is within --tol; 1 on any disagreement; 2 when a prerequisite
(lm_eval, the CSV, the model) is missing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO.parent / "shared" / "data"
TASK = "crows_pairs_english_gender"


class Missing(Exception):
    """A prerequisite is absent; the message names it and the fix."""


@dataclass
class Comparison:
    sentences: list[str]
    ll_ours: np.ndarray  # (n_pairs, 2): sent_more, sent_less
    ll_lm_eval: np.ndarray
    decisions_ours: np.ndarray
    decisions_lm_eval: np.ndarray
    pct_ours: float  # 0..1, lm-eval's scale
    pct_lm_eval: float
    diff_ours: float  # mean |LL(more) - LL(less)|
    diff_lm_eval: float
    seconds_ours: float
    seconds_lm_eval: float

    @property
    def max_abs_ll_diff(self) -> float:
        return float(np.max(np.abs(self.ll_ours - self.ll_lm_eval)))

    @property
    def same_decisions(self) -> int:
        return int(np.sum(self.decisions_ours == self.decisions_lm_eval))

    def agrees(self, tol: float) -> bool:
        return self.same_decisions == len(self.decisions_ours) and self.max_abs_ll_diff <= tol


def crows_csv(data_dir: Path) -> Path:
    from bias_core.probes.crows_pairs import FULL_CSV
    from bias_core.probes.published import find_in_data_dir

    path = find_in_data_dir(data_dir, FULL_CSV)
    if path is None:
        raise Missing(f"no CrowS-Pairs CSV under {data_dir} (looked for {', '.join(FULL_CSV.candidates)}). "
                      "Fix: pass --data-dir pointing at a folder holding crows-pairs/crows_pairs_anonymized.csv.")
    return path


def model_folder(model: str) -> Path:
    """The transformers folder both sides load: a local directory, or a packaged model's
    converted safetensors folder (converted on first use, as the audit does)."""
    from bias_core.errors import AuditUsageError
    from bias_core.models.registry import resolve_model
    from bias_core.models.weights.gguf_cache import converted_dir, locate_gguf
    from bias_core.pytest_plugin.options import default_cache_dir

    try:
        spec = resolve_model(model)
    except AuditUsageError as exc:
        raise Missing(str(exc)) from exc
    if spec.gguf_file:
        return converted_dir(locate_gguf(spec, default_cache_dir()), default_cache_dir(), progress=False)[0]
    if spec.local_dir:
        return Path(spec.local_dir)
    raise Missing(f"--model {model}: needs a local folder or an offline packaged model; lm-eval runs offline here.")


def lm_eval_side(csv_path: Path, folder: Path, batch_size: int,
                 limit: int | None = None) -> tuple[list[dict], np.ndarray, list[dict]]:
    """(docs, log-likelihoods (n, 2), lm-eval's per-doc process_results) from lm-eval's own task."""
    try:
        from lm_eval.models.huggingface import HFLM
        from lm_eval.tasks import TaskManager
    except ImportError as exc:
        raise Missing(f"lm_eval is not installed ({exc}). Fix: pip install lm_eval (a dev-only tool).") from exc
    manager = TaskManager()
    # Only the dataset changes: the rest of the task (prompt, choices, filter, metrics) is
    # lm-eval's registered yaml.
    overrides = {"dataset_path": "csv", "dataset_name": None, "dataset_kwargs": {"data_files": {"test": str(csv_path)}}}
    task = manager._factory.build(manager._entry(TASK), overrides=overrides, registry=manager._index)
    task.build_all_requests(limit=limit, rank=0, world_size=1)
    docs = list(task.test_docs())[:limit]
    hflm = HFLM(pretrained=str(folder), dtype="float32", device="cpu", batch_size=batch_size)
    responses = hflm.loglikelihood(task.instances, disable_tqdm=True)
    by_doc: dict[int, list[tuple[int, tuple[float, bool]]]] = {}
    for inst, resp in zip(task.instances, responses):
        by_doc.setdefault(inst.doc_id, []).append((inst.idx, resp))
    lls, results = [], []
    for doc_id, doc in enumerate(docs):
        resps = [r for _, r in sorted(by_doc[doc_id])]
        lls.append([float(r[0]) for r in resps])
        results.append(task.process_results(doc, resps))
    return docs, np.asarray(lls, dtype=np.float64), results


def compare(data_dir: Path, model: str = "smollm2-135m", batch_size: int = 16, pairs: int | None = None) -> Comparison:
    """lm-eval's and our numbers on the gender pairs (the first ``pairs`` of the CSV's order; all by default)."""
    from bias_core.metrics.preference import crows_score
    from bias_core.models.loading import LoadOptions, load_model
    from bias_core.models.registry import resolve_model
    from bias_core.probes.crows_pairs import read_crows_csv
    from bias_core.pytest_plugin.options import default_cache_dir

    csv_path = crows_csv(data_dir)
    folder = model_folder(model)

    start = time.perf_counter()
    docs, ll_ref, results = lm_eval_side(csv_path, folder, batch_size, pairs)
    seconds_ref = time.perf_counter() - start

    items = read_crows_csv(csv_path)[:pairs]
    ours_pairs = [(i.meta["sent_more"], i.meta["sent_less"]) for i in items]
    theirs = [(d["sent_more"], d["sent_less"]) for d in docs]
    if [tuple(s.strip() for s in p) for p in theirs] != ours_pairs:
        raise RuntimeError("lm-eval's gender docs and our probe items differ in order or text; cannot compare")

    start = time.perf_counter()
    lm = load_model(resolve_model(model),
                    LoadOptions(device="cpu", dtype="float32", batch_size=batch_size, cache_dir=default_cache_dir(),
                                use_cache=False, progress=False))
    # lm-eval scores the raw doc strings; ours come from the probe (stripped): same text here.
    flat = [s for pair in theirs for s in pair]
    ll_ours = np.asarray(lm.sentence_logprob(flat), dtype=np.float64).reshape(-1, 2)
    ours = crows_score(ll_ours[:, 0], ll_ours[:, 1], [i.meta["direction"] for i in items], ids=[i.id for i in items])
    seconds_ours = time.perf_counter() - start

    return Comparison(
        sentences=flat,
        ll_ours=ll_ours,
        ll_lm_eval=ll_ref,
        decisions_ours=np.asarray([d["score"] for d in ours.details]) > 0.5,
        decisions_lm_eval=np.asarray([r["pct_stereotype"] for r in results]) > 0.5,
        pct_ours=ours.value / 100.0,
        pct_lm_eval=float(np.mean([r["pct_stereotype"] for r in results])),
        diff_ours=float(ours.breakdown["likelihood_diff"]),
        diff_lm_eval=float(np.mean([r["likelihood_diff"] for r in results])),
        seconds_ours=seconds_ours,
        seconds_lm_eval=seconds_ref,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--model", default="smollm2-135m", help="registry alias or local model folder")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--tol", type=float, default=1e-3, help="largest allowed |log-likelihood difference| (nats)")
    parser.add_argument("--pairs", type=int, default=None, help="the first N gender pairs only (default: all 262)")
    args = parser.parse_args(argv)
    if "OMP_NUM_THREADS" not in os.environ:
        print("note: OMP_NUM_THREADS is unset; on a shared machine run with OMP_NUM_THREADS=1", file=sys.stderr)
    try:
        result = compare(args.data_dir, args.model, args.batch_size, args.pairs)
    except Missing as exc:
        print(f"cannot check: {exc}", file=sys.stderr)
        return 2
    n = len(result.decisions_ours)
    worst = int(np.argmax(np.abs(result.ll_ours - result.ll_lm_eval).ravel()))
    print(f"model {args.model}, float32, CPU; {n} CrowS-Pairs gender pairs ({2 * n} sentences)")
    print(f"max |delta LL|           : {result.max_abs_ll_diff:.3g} nats (tolerance {args.tol:g}); "
          f"worst sentence: {result.sentences[worst]!r}")
    print(f"identical pair decisions : {result.same_decisions} / {n}")
    print(f"pct_stereotype           : ours {result.pct_ours:.6f}, lm-eval {result.pct_lm_eval:.6f}")
    print(f"likelihood_diff          : ours {result.diff_ours:.6f}, lm-eval {result.diff_lm_eval:.6f}")
    print(f"time                     : ours {result.seconds_ours:.1f} s (load + score), "
          f"lm-eval {result.seconds_lm_eval:.1f} s (task build + load + score)")
    ok = result.agrees(args.tol)
    print("AGREE" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
