"""GenderPair prompts (Tang et al., GenderCARE, ACM CCS 2024, arXiv:2408.12494).

A pair set gives, per gender target, (biased, anti-biased) descriptor pairs. Each pair becomes six
prompts, one per configuration of the pair set (below), each made of an instruction, the rendered
pair set and a requirement to mark the chosen element. Instruction and requirement texts are data
(``bias_core/data/genderpair_prompts.json``), so paraphrase variants are added there, not here.

Configurations, named after the published pair-set keys (the numbering is ours; the paper lists
the six without numbering them in its text):

    1 attribute_set  format1       {B, A}               target named in the instruction
    2 attribute_set  format1_anti  {A, B}
    3 phrase_pairs   format2       {(T, B), (T, A)}
    4 phrase_pairs   format2_anti  {(T, A), (T, B)}
    5 phrase_pairs   format3       {(B, T), (A, T)}
    6 phrase_pairs   format3_anti  {(A, T), (B, T)}

Every order appears once with the biased descriptor first and once second, which cancels the
position preference the paper's own scoring (first match wins) was exposed to.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from string import Template
from typing import Any

import numpy as np

from bias_core.errors import DataFileError
from bias_core.probes.base import Probe, ProbeItem, Select, pooled_probe
from bias_core.probes.data_walk import DataWalk
from bias_core.probes.published import CARE, Counter, Counts, DataDirFile, Online, Shipped, Source
from bias_core.probes.sources import Unique, fetch_text, project_data, read_json

#: Prompts audited over the three groups unless told otherwise (a fixed, seeded sample; the
#: suite and the command line both default to it).
DEFAULT_SAMPLE = 216

GROUPS = (1, 2, 3)
FORMAT_KEYS = ("format1", "format1_anti", "format2", "format2_anti", "format3", "format3_anti")
CONFIGURATIONS = (1, 2, 3, 4, 5, 6)
#: configuration -> (instruction kind, descriptor order, element shape)
_CONFIG_SPEC: dict[int, tuple[str, str, str]] = {
    1: ("attribute_set", "biased_first", "word"),
    2: ("attribute_set", "anti_first", "word"),
    3: ("phrase_pairs", "biased_first", "target_first"),
    4: ("phrase_pairs", "anti_first", "target_first"),
    5: ("phrase_pairs", "biased_first", "target_last"),
    6: ("phrase_pairs", "anti_first", "target_last"),
}
PROBE_NAMES = ("genderpair-group1", "genderpair-group2", "genderpair-group3", "genderpair-robustness")

PAPER = "Tang et al. 2024, GenderCARE (ACM CCS 2024, arXiv:2408.12494)"
UPSTREAM_COMMIT = "942d13525e8a029df11bae5271aa3cb5db48b1a0"
UPSTREAM_DIR = "Datasets/Assess_Gender_Bias/Our_Benchmark_GenderPair/pair_sets"
UPSTREAM = f"https://raw.githubusercontent.com/kstanghere/GenderCARE-ccs24/{UPSTREAM_COMMIT}/{UPSTREAM_DIR}/"
#: The instruction and requirement texts (data, bias_core/data/genderpair_prompts.json), read by every GenderPair probe.
PROMPTS = Shipped("genderpair_prompts.json")
#: Full benchmark size stated in the paper (Sec. 3.3); count_benchmark reproduces it from the files.
PAPER_PROMPT_COUNT = 103_854

_PAIR = re.compile(r"\(\s*([^()]*?)\s*,\s*([^()]*?)\s*\)")


# --------------------------------------------------------------------------------------------
# pair sets


@dataclass(frozen=True)
class TargetPairs:
    target: str
    pairs: tuple[tuple[str, str], ...]  # (biased, anti-biased)


@dataclass(frozen=True)
class PairSet:
    group: int
    targets: tuple[TargetPairs, ...]
    provenance: dict[str, str]

    @property
    def n_prompts(self) -> int:
        return len(CONFIGURATIONS) * sum(len(t.pairs) for t in self.targets)


def _split_pairs(text: Any, where: str) -> list[tuple[str, str]]:
    if not isinstance(text, str):
        raise DataFileError(f"{where}: expected a string '(a, b),(c, d),...', got {type(text).__name__}")
    pairs = _PAIR.findall(text)
    # Anything left over after removing the pairs means a malformed entry, not an empty one.
    leftover = _PAIR.sub("", text).replace(",", "").strip()
    if leftover or not pairs or any(not a or not b for a, b in pairs):
        raise DataFileError(f"{where}: expected '(a, b),(c, d),...', could not parse {text[:80]!r}")
    return pairs


def parse_pairset(rows: Any, group: int, provenance: dict[str, str] | None = None) -> PairSet:
    """Validate the published format and return (target, [(biased, anti)]) per target.

    The six keys repeat the same pairs in six shapes; they are checked against each other so a
    hand-edited file cannot make the configurations disagree about which descriptor is biased.
    """
    name = (provenance or {}).get("loaded_from", f"group{group} pair set")
    if not isinstance(rows, list) or not rows:
        raise DataFileError(f"{name}: expected a non-empty JSON list of objects with keys object, {', '.join(FORMAT_KEYS)}")
    targets = []
    seen_targets = Unique(name, "target")
    for k, row in enumerate(rows):
        absent = [key for key in ("object", *FORMAT_KEYS) if key not in row] if isinstance(row, dict) else ["object"]
        if absent:
            raise DataFileError(f"{name}: entry {k} lacks {', '.join(absent)}")
        if not isinstance(row["object"], str) or not row["object"].strip():
            raise DataFileError(f"{name}: entry {k}: object must be a non-empty string, got {row['object']!r:.60}")
        target = row["object"].strip()
        seen_targets.add(target, f"entry {k}")
        parsed = {key: _split_pairs(row[key], f"{name}: {target!r} {key}") for key in FORMAT_KEYS}
        pairs = parsed["format1"]
        seen_pairs = Unique(name, "descriptor pair")
        for i, pair in enumerate(pairs):
            seen_pairs.add(pair, f"entry {k} (target {target!r}) format1 pair {i}")
        for i, (b, a) in enumerate(pairs):
            expected = {"format1_anti": (a, b), "format2": (target, b), "format2_anti": (target, a),
                        "format3": (b, target), "format3_anti": (a, target)}
            for key, want in expected.items():
                got = parsed[key][i] if i < len(parsed[key]) else None
                if got != want:
                    raise DataFileError(f"{name}: target {target!r} pair {i}: {key} has {got} but format1 "
                                     f"({b}, {a}) implies {want}; fix the file so all six keys agree")
        for key in FORMAT_KEYS:
            if len(parsed[key]) != len(pairs):
                raise DataFileError(f"{name}: target {target!r}: {key} has {len(parsed[key])} pairs, format1 {len(pairs)}")
        targets.append(TargetPairs(target, tuple(pairs)))
    return PairSet(group, tuple(targets), dict(provenance or {}))


def pairset_counter(group: int) -> Counter:
    """What published.py checks a group's pair-set file by."""

    def count(path: Path) -> Counts:
        pairset = parse_pairset(read_json(path), group, {"loaded_from": str(path)})
        return {"targets": len(pairset.targets), "descriptor pairs": sum(len(t.pairs) for t in pairset.targets)}

    return count


def _pairset_file(group: int, sha256: str, targets: int, pairs: int) -> DataDirFile:
    file = f"group{group}_pairset.json"
    return DataDirFile((f"GenderCARE-ccs24/{file}", file, f"GenderCARE-ccs24/{UPSTREAM_DIR}/group{group}/{file}",
                        f"{UPSTREAM_DIR}/group{group}/{file}"), f"GenderPair pair set, group {group}", sha256,
                       {"targets": targets, "descriptor pairs": pairs}, CARE, pairset_counter(group))


#: group -> its published pair-set file in --data-dir
PAIRSETS: dict[int, DataDirFile] = {g: _pairset_file(g, *published) for g, published in (
    (1, ("687aaeced86d35abd3246aefa3c32ec6225d4c5e01fd46a372d36a2886fea181", 64, 5440)),
    (2, ("8b6d952ea2390009722b4fa4d758896b687f2caf320b46c26256b9af964babd3", 64, 5312)),
    (3, ("7af0ffbbef668f4b0cd32bb20da7681590609cb0bb9e9ab58d15dc22d5b54b48", 79, 6557)))}


def upstream_url(group: int) -> str:
    return f"{UPSTREAM}group{group}/group{group}_pairset.json"


#: group -> the project-written stand-in for its pair set (bias_core/data/GENDERPAIR.md)
STAND_INS: dict[int, Shipped] = {g: Shipped(f"genderpair_pairset_group{g}.json") for g in GROUPS}
#: group -> where its pair set comes from, in the order tried: the paper's from --data-dir, else
#: online, else the project's stand-in.
PAIRSET_SOURCES: dict[int, tuple[Source, ...]] = {g: (PAIRSETS[g], Online(upstream_url(g)), STAND_INS[g]) for g in GROUPS}
#: The catalogue's declarations, in the order the loaders read: a group's pair set, then the prompt
#: texts; the robustness probe the texts (its wordings) first, then each group's pair set.
GROUP_SOURCES: dict[int, tuple[Source, ...]] = {g: (*PAIRSET_SOURCES[g], PROMPTS) for g in GROUPS}
ROBUSTNESS_SOURCES: tuple[Source, ...] = (PROMPTS, *(s for g in GROUPS for s in PAIRSET_SOURCES[g]))


def load_published_pairset(group: int, data_dir: Path | None) -> PairSet:
    """The paper's pair set: from ``--data-dir`` first, then the repository online.

    Raises DataSourceMissing naming every place looked at when neither is available.
    """
    return _walk_pairset(group, data_dir, stand_in=False)


def load_project_pairset(group: int) -> PairSet:
    """The project-written stand-in (not the paper's descriptors; see bias_core/data/GENDERPAIR.md)."""
    _check_group(group)
    return _project_pairset(group, project_data(STAND_INS[group].file))


def load_pairset(group: int, data_dir: Path | None = None, source: str = "auto") -> PairSet:
    """Pair set of one group.

    ``source``: ``"published"`` (data dir, then online; DataSourceMissing if neither),
    ``"project"`` (the project-written set), or ``"auto"``: published when available, else the
    project-written set; ``provenance["kind"]`` says which one a run used.
    """
    if source == "project":
        return load_project_pairset(group)
    if source == "published":
        return load_published_pairset(group, data_dir)
    if source != "auto":
        raise ValueError(f"load_pairset: source must be 'auto', 'published' or 'project', got {source!r}")
    return _walk_pairset(group, data_dir, stand_in=True)


def _walk_pairset(group: int, data_dir: Path | None, stand_in: bool) -> PairSet:
    """The first of the group's pair-set sources found (``stand_in`` False: the published ones only)."""
    _check_group(group)
    walk = DataWalk(data_dir, [s for s in PAIRSET_SOURCES[group] if stand_in or s is not STAND_INS[group]])
    what = f"GenderPair group {group} pair set"
    for found in walk:
        if found.source is PAIRSETS[group]:
            return parse_pairset(read_json(found.path), group, _published_provenance(group, str(found.path)))
        if found.source is STAND_INS[group]:  # no published copy could be used
            pairset = _project_pairset(group, found.path)
            pairset.provenance["published_unavailable"] = str(walk.missing(what))
            return pairset
        with walk.fetching():  # reported in the skip reason
            rows = json.loads(fetch_text(found.source.where))
            return parse_pairset(rows, group, _published_provenance(group, found.source.where))
    raise walk.missing(what)


def _published_provenance(group: int, loaded_from: str) -> dict[str, str]:
    return {"source": f"{PAPER}: published GenderPair pair set, group {group}", "licence": "MIT",
            "loaded_from": loaded_from, "kind": "published"}


def _project_pairset(group: int, path: Path) -> PairSet:
    rows = json.loads(path.read_text(encoding="utf-8"))
    return parse_pairset(rows, group, {"source": "written by the project (bias_core/data/GENDERPAIR.md), not the paper's pair set",
                                       "licence": "Apache-2.0", "loaded_from": "project data", "kind": "project",
                                       "stand_in": "the project-written GenderPair set, not the paper's descriptors"})


def _check_group(group: int) -> None:
    if group not in GROUPS:
        raise ValueError(f"GenderPair group must be one of {GROUPS}, got {group!r}")


def count_benchmark(pairsets: Sequence[PairSet]) -> dict[str, int]:
    """Prompts per group and in total: targets x pairs x 6 configurations.

    On the published files: 64 x 85 x 6 + 64 x 83 x 6 + 79 x 83 x 6 = 32,640 + 31,872 + 39,342
    = 103,854, the paper's count (its evaluate_BPR.py also steps through responses in blocks of
    six per pair, one per configuration).
    """
    counts = {f"group{p.group}": p.n_prompts for p in pairsets}
    counts["total"] = sum(p.n_prompts for p in pairsets)
    return counts


# --------------------------------------------------------------------------------------------
# prompt texts


@dataclass(frozen=True)
class PromptVariant:
    name: str
    mark: tuple[str, str]
    texts: dict[str, dict[str, str]]  # kind -> {"instruction", "requirement"}
    description: str = ""


def load_prompt_variants(path: Path | None = None) -> dict[str, PromptVariant]:
    """Instruction/requirement variants from JSON (the project's file unless ``path`` is given)."""
    path = path or project_data(PROMPTS.file)
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out = {}
    for name, spec in data["variants"].items():
        for kind in ("attribute_set", "phrase_pairs"):
            for part in ("instruction", "requirement"):
                if not str(spec.get(kind, {}).get(part, "")).strip():
                    raise ValueError(f"{path}: variant {name!r} lacks {kind}.{part}")
        mark = tuple(spec.get("mark", ["{", "}"]))
        if len(mark) != 2 or not all(mark):
            raise ValueError(f"{path}: variant {name!r}: mark must be [open, close], got {spec.get('mark')!r}")
        out[name] = PromptVariant(name, mark, {k: dict(spec[k]) for k in ("attribute_set", "phrase_pairs")}, spec.get("description", ""))
    return out


def robustness_variant_names(path: Path | None = None) -> list[str]:
    data = json.loads(Path(path or project_data(PROMPTS.file)).read_text(encoding="utf-8"))
    return list(data["robustness_variants"])


@dataclass(frozen=True)
class GenderPairPrompt:
    """One benchmark prompt. ``key`` identifies it across paraphrase variants."""

    group: int
    target: str
    pair_index: int
    biased: str
    anti: str
    configuration: int
    variant: str
    text: str
    mark: tuple[str, str] = ("{", "}")

    @property
    def key(self) -> str:
        return f"g{self.group}:{self.target}:{self.pair_index}:c{self.configuration}"

    @property
    def id(self) -> str:
        return f"{self.key}:{self.variant}"

    def to_item(self) -> ProbeItem:
        meta = {"group": self.group, "target": self.target, "pair_index": self.pair_index, "biased": self.biased,
                "anti": self.anti, "configuration": self.configuration, "variant": self.variant,
                "mark": list(self.mark), "key": self.key}
        return ProbeItem(id=self.id, prompt=self.text, meta=meta)


def render_pair_set(configuration: int, target: str, biased: str, anti: str) -> str:
    """The pair set as printed in the paper's Table 1: "{B, A}" or "{(T, B), (T, A)}"."""
    _, order, shape = _CONFIG_SPEC[configuration]
    first, second = (biased, anti) if order == "biased_first" else (anti, biased)
    if shape == "word":
        return "{" + f"{first}, {second}" + "}"
    if shape == "target_first":
        return "{" + f"({target}, {first}), ({target}, {second})" + "}"
    return "{" + f"({first}, {target}), ({second}, {target})" + "}"


def build_prompt(target: str, biased: str, anti: str, configuration: int, variant: PromptVariant) -> str:
    """Instruction (with the pair set) and requirement, joined by one space ([instruction & pair
    set & requirement], the paper's Table 1)."""
    if configuration not in _CONFIG_SPEC:
        raise ValueError(f"configuration must be one of {CONFIGURATIONS}, got {configuration!r}")
    kind = _CONFIG_SPEC[configuration][0]
    texts = variant.texts[kind]
    # string.Template keeps the literal braces of the texts ("{$target}", "'{}'") untouched.
    instruction = Template(texts["instruction"]).substitute(target=target, set=render_pair_set(configuration, target, biased, anti))
    return f"{instruction} {texts['requirement']}"


def build_prompts(pairset: PairSet, variant: PromptVariant, configurations: Sequence[int] = CONFIGURATIONS) -> list[GenderPairPrompt]:
    """All prompts of a pair set under one variant, ordered target, pair, configuration (the
    order of the published prompt files)."""
    return list(iter_prompts(pairset, variant, configurations))


def iter_prompts(pairset: PairSet, variant: PromptVariant, configurations: Sequence[int] = CONFIGURATIONS) -> Iterator[GenderPairPrompt]:
    """``build_prompts``, one prompt at a time."""
    for t in pairset.targets:
        for i, (biased, anti) in enumerate(t.pairs):
            for c in configurations:
                yield GenderPairPrompt(pairset.group, t.target, i, biased, anti, c, variant.name,
                                       build_prompt(t.target, biased, anti, c, variant), variant.mark)


def with_variant(prompts: Sequence[GenderPairPrompt], variant: PromptVariant) -> list[GenderPairPrompt]:
    """The same (target, pair, configuration) items re-worded under another variant; keys are
    kept, so results line up item by item across variants."""
    return [replace(p, variant=variant.name, mark=variant.mark,
                    text=build_prompt(p.target, p.biased, p.anti, p.configuration, variant)) for p in prompts]


# --------------------------------------------------------------------------------------------
# sampling


def _stratum_seed(seed: int, key: Hashable) -> list[int]:
    # A stratum's draw depends on its own key only (crc32 is stable across runs, unlike hash()),
    # so sampling group 1 alone picks the same items as group 1's part of a joint sample.
    return [int(seed), zlib.crc32(repr(key).encode("utf-8"))]


def sample(prompts: Sequence[GenderPairPrompt], n: int, seed: int = 0,
           strata: Callable[[GenderPairPrompt], Hashable] = lambda p: (p.group, p.configuration)) -> list[GenderPairPrompt]:
    """A seeded sample of ``n`` prompts stratified over group x configuration.

    Allocation is equal across strata (every stratum gets L or L + 1 prompts; the + 1 goes to the
    strata first in sorted order), so every group gets the same precision whatever its size; a
    stratum smaller than its share gives all its prompts and the rest is spread over the others. Within
    a stratum items are drawn without replacement; the result keeps the input order. Same
    prompts, n and seed give the same sample; ``n >= len(prompts)`` returns all of them.
    """
    if n < 0:
        raise ValueError(f"sample: n must be >= 0, got {n}")
    if n >= len(prompts):
        return list(prompts)
    by_stratum: dict[Hashable, list[int]] = defaultdict(list)
    for i, p in enumerate(prompts):
        by_stratum[strata(p)].append(i)
    keys = sorted(by_stratum, key=repr)
    sizes = {k: len(by_stratum[k]) for k in keys}
    # Water-filling: the highest common level L with sum(min(size, L)) <= n, then one more for
    # the first strata (sorted order) that can still give one, until n is reached.
    lo, hi = 0, max(sizes.values())
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(s, mid) for s in sizes.values()) <= n:
            lo = mid
        else:
            hi = mid - 1
    quota = {k: min(sizes[k], lo) for k in keys}
    remaining = n - sum(quota.values())
    for k in keys:
        if remaining and sizes[k] > lo:
            quota[k] += 1
            remaining -= 1
    chosen: list[int] = []
    for k in keys:
        idx = by_stratum[k]
        rng = np.random.default_rng(_stratum_seed(seed, k))
        chosen.extend(idx[j] for j in rng.choice(len(idx), size=quota[k], replace=False))
    return [prompts[i] for i in sorted(chosen)]


# --------------------------------------------------------------------------------------------
# probes


def group_probe(group: int, data_dir: Path | None = None, n: int | None = None, seed: int = 0,
                variant: str | None = None, source: str = "auto", select: Select | None = None) -> Probe:
    """Probe ``genderpair-group{g}``: one group's prompts under one variant, sampled to ``n``; the
    whole group when ``n`` is None, of which ``select`` (see ``probes.base.pooled_probe``) keeps part."""
    pairset = load_pairset(group, data_dir, source)
    variants = load_prompt_variants()
    variant = variant or "paper"
    if variant not in variants:
        raise KeyError(f"unknown GenderPair prompt variant {variant!r}; known: {', '.join(variants)}")
    name = f"genderpair-group{group}"
    if n is None:
        total = pairset.n_prompts
        provenance = {**pairset.provenance, "variant": variant, "prompts_in_full_set": str(total), "sampled": str(total),
                      "seed": str(seed)}
        return pooled_probe(name, "1", lambda: (p.to_item() for p in iter_prompts(pairset, variants[variant])),
                            provenance, select)
    prompts = build_prompts(pairset, variants[variant])
    total = len(prompts)
    prompts = sample(prompts, n, seed)
    return Probe(name, "1", tuple(p.to_item() for p in prompts),
                 {**pairset.provenance, "variant": variant, "prompts_in_full_set": str(total), "sampled": str(len(prompts)),
                  "seed": str(seed)})


def robustness_probe(data_dir: Path | None = None, n: int | None = None, seed: int = 0,
                     variants: Sequence[str] | None = None, source: str = "auto", select: Select | None = None) -> Probe:
    """Probe ``genderpair-robustness``: the same sampled items of all groups under every
    paraphrase variant (items share ``meta["key"]`` across variants); every item of every group
    when ``n`` is None, of which ``select`` (see ``probes.base.pooled_probe``) keeps part."""
    known = load_prompt_variants()
    names = list(variants or robustness_variant_names())
    unknown = [v for v in names if v not in known]
    if unknown or len(names) < 2:
        raise ValueError(f"robustness_probe: need >= 2 known variants, got {names}; known: {', '.join(known)}")
    pairsets = [load_pairset(g, data_dir, source) for g in GROUPS]
    kinds = {pairset.provenance.get("kind", "") for pairset in pairsets}

    def provenance(per_variant: int) -> dict[str, str]:
        return {"source": f"{PAPER}, Sec. 5.4.1 (robustness to prompt structure)", "pair_sets": "+".join(sorted(kinds)),
                "variants": ",".join(names), "items_per_variant": str(per_variant), "seed": str(seed),
                **({"stand_in": "the project-written GenderPair set, not the paper's descriptors"} if "project" in kinds else {})}

    if n is None:
        # Every variant's items in turn, each the groups' prompts in order: what with_variant
        # gives on the unsampled base, made one at a time.
        per_variant = sum(ps.n_prompts for ps in pairsets)
        return pooled_probe("genderpair-robustness", "1",
                            lambda: (p.to_item() for v in names for ps in pairsets for p in iter_prompts(ps, known[v])),
                            provenance(per_variant), select)
    base: list[GenderPairPrompt] = []
    for pairset in pairsets:
        base.extend(sample(build_prompts(pairset, known[names[0]]), n // len(GROUPS), seed))
    items = [p.to_item() for v in names for p in with_variant(base, known[v])]
    return Probe("genderpair-robustness", "1", tuple(items), provenance(len(base)))


def load_group(name: str, data_dir: Path | None = None, sample: int | None = DEFAULT_SAMPLE, seed: int = 0,
               select: Select | None = None) -> Probe:
    """``genderpair-group{g}`` (the catalogue's loader) with its third of ``sample`` prompts
    over the three groups (None: all of them, of which ``select`` keeps part)."""
    n = None if sample is None else max(1, sample // len(GROUPS))
    return group_probe(int(name.removeprefix("genderpair-group")), data_dir, n=n, seed=seed, select=select)


def load_robustness(data_dir: Path | None = None, sample: int | None = DEFAULT_SAMPLE, seed: int = 0,
                    select: Select | None = None) -> Probe:
    """``genderpair-robustness`` (the catalogue's loader): a quarter of ``sample`` under each of
    the four wordings, as many generations as the group probes, and the paper wording's are
    shared with theirs when sampled alike (None: all of them, of which ``select`` keeps part)."""
    n = None if sample is None else max(len(GROUPS), sample // 4)
    return robustness_probe(data_dir, n=n, seed=seed, select=select)


def prompt_from_item(item: ProbeItem) -> GenderPairPrompt:
    """Back from a ProbeItem (what suites hold) to the prompt record the metrics use."""
    m = item.meta
    return GenderPairPrompt(int(m["group"]), m["target"], int(m["pair_index"]), m["biased"], m["anti"],
                            int(m["configuration"]), m["variant"], item.prompt, tuple(m.get("mark", ("{", "}"))))
