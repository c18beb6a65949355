"""No table of metric or probe names outside the catalogue: a metric's or a probe's name written
as a string in bias_core is a second declaration that the catalogue's cannot keep true.

The source is read with ``ast`` (nothing is imported, as in tests/test_import_rules.py). A name
may be written:

- in ``bias_core/catalogue.py``, where each is declared;
- in the data loaders (``bias_core/probes/``): a loader names the probe it makes;
- by the functions a metric's catalogue entry names (``compute``, ``runner``, ``examples``): each
  names the result it returns (and a comparison, the metric it compares: ``of``). Which module may
  write which metric is read from the catalogue, not listed here;
- where ``ALLOWED`` says why, or in a file of ``LAYOUTS``: the papers' published tables, whose
  columns are the papers' and name the project's row each one shows. Docstrings are prose and
  are not read.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from bias_core import catalogue

PACKAGE = Path(__file__).resolve().parent.parent / "bias_core"
DECLARED_IN = ("catalogue.py", "probes/")

#: (file under bias_core/, or "*" for any, name) -> why that file writes that name.
ALLOWED: dict[tuple[str, str], str] = {
    ("*", "toxicity"): "also the toxicity classifier's name and its score's (classifiers/, --toxicity-classifier)",
    ("reports/paper_tables_render.py", "da-gender"): "the DA-Gender paper's key among the papers laid out, which "
                                                     "its probe is named after",
    ("suites/mitigation.py", "BPR"): "BPR's items are the prompts a response decides: GenderCARE's re-audit pairs "
                                     "only those both models decide (gendercare_reaudit.decided_in_both)",
}

#: file under bias_core/ -> why it names metrics and probes: a transcription of published tables.
LAYOUTS: dict[str, str] = {
    "reports/paper_tables.py": "the seed papers' tables as printed (Dong Tables 1/2/3/9/10, DA-Gender 7/8, GenderCARE "
                               "4-6, GBM 2): each paper column names the project's metric and probe it shows",
}


def _module_file(reference: str) -> str:
    """bias_core/x/y.py of "bias_core.x.y:function", relative to the package."""
    module = reference.partition(":")[0]
    return module.removeprefix("bias_core.").replace(".", "/") + ".py"


def named_by_the_catalogue() -> dict[str, set[str]]:
    """file -> the metrics whose catalogue entries name a function in it (and what those compare)."""
    out: dict[str, set[str]] = {}
    for m in catalogue.METRICS:
        for reference in (m.compute, m.runner, m.examples):
            if reference is not None:
                out.setdefault(_module_file(reference), set()).update({m.name} | ({m.of} if m.of else set()))
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def written_names(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string constant of ``source`` that is exactly one of ``names``,
    docstrings left out."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = sorted((node.lineno, node.col_offset, node.value) for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
                   and id(node) not in docs)
    return [(line, name) for line, _, name in found]


@functools.lru_cache(maxsize=4)
def _written(package: Path, names: frozenset[str]) -> tuple[tuple[str, int, str], ...]:
    """(file, line, name) of every name written outside the declarations, each file parsed once."""
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel != DECLARED_IN[0] and not rel.startswith(DECLARED_IN[1]):
            out += [(rel, line, name) for line, name in written_names(path.read_text(encoding="utf-8"), set(names))]
    return tuple(out)


def stray_names(package: Path, metrics: set[str], probes: set[str], functions: dict[str, set[str]],
                allowed: dict[tuple[str, str], str]) -> list[str]:
    """"file:line: name" for each metric or probe name written where it is not declared, not
    made by a function the catalogue names there, and not allowed."""
    return [f"{rel}:{line}: {name}" for rel, line, name in _written(package, frozenset(metrics | probes))
            if name not in functions.get(rel, set()) and (rel, name) not in allowed and ("*", name) not in allowed
            and rel not in LAYOUTS]


def test_no_metric_or_probe_name_is_written_outside_the_catalogue_and_the_data_loaders():
    metrics = {m.name for m in catalogue.METRICS}
    probes = set(catalogue.PROBES)
    stray = stray_names(PACKAGE, metrics, probes, named_by_the_catalogue(), ALLOWED)
    assert stray == [], ("names written outside the catalogue: read them from it (bias_core/catalogue.py: a "
                         "declaration's field, catalogue.spec/probe, tradeoff_axes, reductions, guards) or, with "
                         "a reason, add them to ALLOWED", stray)


def test_every_allowance_is_still_needed():
    metrics = {m.name for m in catalogue.METRICS}
    probes = set(catalogue.PROBES)
    for (where, name), why in ALLOWED.items():
        assert why.strip() and name in metrics | probes, (where, name)
        rest = {k: v for k, v in ALLOWED.items() if k != (where, name)}
        assert stray_names(PACKAGE, metrics, probes, named_by_the_catalogue(), rest), f"{where}, {name}: not needed"
    for where, why in LAYOUTS.items():
        assert why.strip() and any(rel == where for rel, _, _ in _written(PACKAGE, frozenset(metrics | probes))), where


def test_the_checker_finds_a_name_in_code_but_not_in_prose_nor_where_the_catalogue_allows_it(tmp_path):
    pkg = tmp_path / "bias_core"
    (pkg / "probes").mkdir(parents=True)
    (pkg / "metrics").mkdir()
    (pkg / "catalogue.py").write_text('PROBES = {"toy-pairs": 1}\nMETRICS = ("toy_share",)\n')
    (pkg / "probes" / "toy.py").write_text('NAME = "toy-pairs"\n')
    (pkg / "metrics" / "toy.py").write_text('"""toy_share: computed here."""\ndef share():\n    return "toy_share"\n')
    (pkg / "report.py").write_text('"""Shows toy_share."""\nORDER = ("toy_share", "toy-pairs")\nWORD = "toy"\n'
                                   'def f():\n    """toy_share"""\n    return f"{WORD}_share"\n')
    functions = {"metrics/toy.py": {"toy_share"}}
    found = stray_names(pkg, {"toy_share"}, {"toy-pairs"}, functions, {})
    assert found == ["report.py:2: toy_share", "report.py:2: toy-pairs"]
    assert stray_names(pkg, {"toy_share"}, {"toy-pairs"}, {}, {}) == [
        "metrics/toy.py:3: toy_share", "report.py:2: toy_share", "report.py:2: toy-pairs"]
    assert stray_names(pkg, {"toy_share"}, {"toy-pairs"}, functions, {("report.py", "toy_share"): "why",
                                                                      ("*", "toy-pairs"): "why"}) == []
