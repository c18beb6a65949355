"""No metric or probe knowledge outside the catalogue: a metric's or a probe's name written as a
string in bias_core/ or audits/ is a second declaration that the catalogue's cannot keep true, and
so is code that decides what a metric is by the shape of its name.

Every module of ``bias_core/`` and ``audits/`` is read with ``ast`` (nothing is imported, as in
tests/test_import_rules.py); docstrings are prose and are not read. A name may be written:

- in ``bias_core/catalogue.py``, where each is declared;
- inside the function a metric's catalogue entry names as its ``compute`` or ``examples``: the
  pure function names the result it makes (a comparison, also the metric it compares: ``of``),
  the report's table the metric it shows; inside its ``runner`` only when that runner gives this
  metric alone. A runner of several metrics names none of them: it is handed them, or reads them
  from the catalogue (``catalogue.computed_by``). Which function may write which name is read
  from the catalogue, not listed here;
- in the module of the loader a probe's declaration names: the probe it makes;
- where ``ALLOWED`` says why (file, name).

No code tests a metric's name for a fragment of a declared name (a word or more of it:
"regard_", "_reduction", "proxy") with ``startswith``, ``endswith``, ``removeprefix``,
``removesuffix`` or ``in``: what a metric is, its entry's fields say (``scorer``, ``stand_in``,
``variant_of``, ``of``, ...), read through ``catalogue.spec``. A test counts when its fragment
has a "_" or the string tested is visibly a metric's name (``metric``, ``.name``): "margin" in a
thresholds entry is not one. ``FRAGMENTS_ALLOWED`` says why for each test left.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from bias_core import catalogue

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("bias_core", "audits")
DECLARED_IN = "bias_core/catalogue.py"

_PAPER_COLUMN = ("the seed papers' tables as printed (Dong Tables 1/2/3/9/10, DA-Gender 7/8, GenderCARE 4-6, GBM 2): "
                 "a paper's column or row names the project's metric or probe it shows")
_PAPER_TABLES = "bias_core/reports/paper_tables.py"

#: (file, or "*" for any, name) -> why that file writes that name.
ALLOWED: dict[tuple[str, str], str] = {
    ("*", "toxicity"): "also the toxicity classifier's role and its score's name (classifiers/, --toxicity-classifier)",
    ("bias_core/reports/paper_tables_render.py", "da-gender"): "the DA-Gender paper's key among the papers laid out, "
                                                               "which its probe is named after",
    ("bias_core/suites/mitigation.py", "BPR"): "BPR's items are the prompts a response decides: GenderCARE's re-audit "
                                               "pairs only those both models decide (gendercare_reaudit.decided_in_both)",
    **{(_PAPER_TABLES, name): _PAPER_COLUMN for name in (
        # Dong et al.: the mitigation tables' data sets and metrics
        "natural-default", "natural-stsb", "natural-snli", "llm-generated-1", "llm-generated-2", "GAS", "GLD", "ADD",
        # DA-Gender Tables 7 and 8 ("da-gender" is also the paper's key)
        "seat-v1", "seat-v2", "SEAT_effect", "logprob-professions", "logprob_effect", "stereoset-gender",
        "stereo_score", "da-gender", "DA_score", "DA_score_drop", "lm_score", "lm_score_drop",
        # GenderCARE Tables 4-6: the paper's regard metrics; a proxy's run shows their variant_of
        "BPR", "genderpair-groups", "regard_negative", "regard_positive_gap", "bold-gender",
        "bold_regard_negative_gap_reduction", "bold_regard_positive_gap_reduction", "stereo_margin_reduction",
        # GBM Table 2
        "GBM", "sentiment-templates")},
}

#: (file, fragment) -> why that file tests a name for that fragment of a declared metric's name.
FRAGMENTS_ALLOWED: dict[tuple[str, str], str] = {
    ("bias_core/mitigation/evaluation/results_table.py", "_reduction"):
        "the mitigation table shows a paired reduction's two sides under the name before '_reduction' "
        "(stereo_margin of stereo_margin_reduction, whose of is stereo_score): reading `of` would change the table",
}

_SHAPE_TESTS = ("startswith", "endswith", "removeprefix", "removesuffix")


def _reference(reference: str) -> tuple[str, str]:
    """(bias_core/x/y.py, function) of "bias_core.x.y:function"."""
    module, _, function = reference.partition(":")
    return module.replace(".", "/") + ".py", function


def owners() -> dict[tuple[str, str | None], set[str]]:
    """(file, top-level function, or None for anywhere in the file) -> the names it may write,
    read from the declarations (module doc)."""
    out: dict[tuple[str, str | None], set[str]] = {}
    runs = {}
    for m in catalogue.METRICS:
        runs.setdefault(m.runner, []).append(m)
    for m in catalogue.METRICS:
        made = {m.name} | ({m.of} if m.of else set())
        references = [m.compute, m.examples] + ([m.runner] if m.runner and len(runs[m.runner]) == 1 else [])
        for reference in references:
            out.setdefault(_reference(reference), set()).update(made)
    for p in catalogue.PROBES.values():
        if isinstance(p.loader, str):
            out.setdefault((_reference(p.loader)[0], None), set()).add(p.name)
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _in_functions(tree: ast.Module):
    """(node, the top-level function it is in, or None) for every node of the module."""
    for top in tree.body:
        function = top.name if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        for node in ast.walk(top):
            yield node, function


def written_names(source: str, names: set[str]) -> list[tuple[int, str, str | None]]:
    """(line, name, top-level function or None) of every string constant of ``source`` that is
    exactly one of ``names``, docstrings left out."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = sorted((node.lineno, node.col_offset, node.value, function or "") for node, function in _in_functions(tree)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
                   and id(node) not in docs)
    return [(line, name, function or None) for line, _, name, function in found]


def is_fragment(text: str, names: set[str]) -> bool:
    """``text`` is a word or more of a declared name, "_" at either end or none, not a name itself
    (nor a word of under three letters: "s" of bbq_s_dis)."""
    words = text.strip("_").split("_")
    if text in names or not all(words) or len(text.strip("_")) < 3:
        return False
    for name in names:
        parts = name.split("_")
        if any(parts[i:i + len(words)] == words for i in range(len(parts) - len(words) + 1)):
            return True
    return False


def _a_name(subject: ast.expr) -> bool:
    """The string tested is visibly a metric's name: ``metric``, ``row["metric"]``, ``m.name``."""
    return "metric" in ast.unparse(subject) or (isinstance(subject, ast.Attribute) and subject.attr == "name")


def shape_tests(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, fragment) of every test of a name for a fragment of one of ``names``: a
    ``startswith``-like call's constant argument, or the constant left of ``in`` (module doc)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        constants: list[ast.expr] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SHAPE_TESTS:
            subject = node.func.value
            for arg in node.args:
                constants += arg.elts if isinstance(arg, ast.Tuple) else [arg]
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            subject = node.comparators[0]
            constants.append(node.left)
        found += [(node.lineno, c.value) for c in constants if isinstance(c, ast.Constant) and isinstance(c.value, str)
                  and is_fragment(c.value, names) and ("_" in c.value or _a_name(subject))]
    return sorted(set(found))


def _sources(root: Path) -> list[tuple[str, str]]:
    """(file relative to ``root``, its text) of every module scanned, the declarations left out."""
    out = []
    for top in SCANNED:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel != DECLARED_IN:
                out.append((rel, path.read_text(encoding="utf-8")))
    return out


@functools.lru_cache(maxsize=4)
def _written(root: Path, names: frozenset[str]) -> tuple[tuple[str, int, str, str | None], ...]:
    """(file, line, name, function) of every name written outside the declarations, each file parsed once."""
    return tuple((rel, line, name, function) for rel, source in _sources(root)
                 for line, name, function in written_names(source, set(names)))


def stray_names(root: Path, metrics: set[str], probes: set[str], owned: dict[tuple[str, str | None], set[str]],
                allowed: dict[tuple[str, str], str]) -> list[str]:
    """"file:line: name" for each metric or probe name written where it is not declared, not
    written by the function or loader module the catalogue names for it, and not allowed."""
    return [f"{rel}:{line}: {name}" for rel, line, name, function in _written(root, frozenset(metrics | probes))
            if name not in owned.get((rel, function), set()) and name not in owned.get((rel, None), set())
            and (rel, name) not in allowed and ("*", name) not in allowed]


def stray_shape_tests(root: Path, metrics: set[str], allowed: dict[tuple[str, str], str]) -> list[str]:
    """"file:line: fragment" for each test of a name's shape that ``allowed`` does not explain."""
    return [f"{rel}:{line}: {fragment!r}" for rel, source in _sources(root)
            for line, fragment in shape_tests(source, metrics) if (rel, fragment) not in allowed]


def _metrics() -> set[str]:
    return {m.name for m in catalogue.METRICS}


def test_no_metric_or_probe_name_is_written_outside_the_catalogue():
    stray = stray_names(ROOT, _metrics(), set(catalogue.PROBES), owners(), ALLOWED)
    assert stray == [], ("names written outside the catalogue: read them from it (bias_core/catalogue.py: a "
                         "declaration's field, catalogue.spec/probe/computed_by, tradeoff_axes, reductions, guards) "
                         "or, with a reason, add them to ALLOWED", stray)


def test_no_code_decides_what_a_metric_is_by_its_name():
    stray = stray_shape_tests(ROOT, _metrics(), FRAGMENTS_ALLOWED)
    assert stray == [], ("a metric's name tested for a fragment: declare what it says as a field of MetricSpec "
                         "(scorer, stand_in, variant_of, of, ...) and read it, or say why in FRAGMENTS_ALLOWED", stray)


def test_every_allowance_is_still_needed():
    metrics, probes = _metrics(), set(catalogue.PROBES)
    for (where, name), why in ALLOWED.items():
        assert why.strip() and name in metrics | probes, (where, name)
        rest = {k: v for k, v in ALLOWED.items() if k != (where, name)}
        assert stray_names(ROOT, metrics, probes, owners(), rest), f"{where}, {name}: not needed"
    for (where, fragment), why in FRAGMENTS_ALLOWED.items():
        assert why.strip() and is_fragment(fragment, metrics), (where, fragment)
        rest = {k: v for k, v in FRAGMENTS_ALLOWED.items() if k != (where, fragment)}
        assert stray_shape_tests(ROOT, metrics, rest), f"{where}, {fragment!r}: not needed"


def test_the_checker_finds_a_name_in_code_but_not_in_prose_nor_where_the_catalogue_allows_it(tmp_path):
    pkg = tmp_path / "bias_core"
    (pkg / "probes").mkdir(parents=True)
    (pkg / "metrics").mkdir()
    (tmp_path / "audits").mkdir()
    (pkg / "catalogue.py").write_text('PROBES = {"toy-pairs": 1}\nMETRICS = ("toy_share",)\n')
    (pkg / "probes" / "toy.py").write_text('NAME = "toy-pairs"\n')
    (pkg / "metrics" / "toy.py").write_text('"""toy_share: computed here."""\ndef share():\n    return "toy_share"\n'
                                            'TABLE = {"toy_share": share}\n')
    (pkg / "report.py").write_text('"""Shows toy_share."""\nORDER = ("toy_share", "toy-pairs")\nWORD = "toy"\n'
                                   'def f():\n    """toy_share"""\n    return f"{WORD}_share"\n')
    (tmp_path / "audits" / "test_toy.py").write_text('CASES = ["toy-pairs"]\n')
    owned = {("bias_core/metrics/toy.py", "share"): {"toy_share"}, ("bias_core/probes/toy.py", None): {"toy-pairs"}}
    names = ({"toy_share"}, {"toy-pairs"})
    # the function the catalogue names may write its metric, not the rest of its module
    assert stray_names(tmp_path, *names, owned, {}) == [
        "bias_core/metrics/toy.py:4: toy_share", "bias_core/report.py:2: toy_share",
        "bias_core/report.py:2: toy-pairs", "audits/test_toy.py:1: toy-pairs"]
    assert stray_names(tmp_path, *names, {}, {})[:3] == [
        "bias_core/metrics/toy.py:3: toy_share", "bias_core/metrics/toy.py:4: toy_share",
        "bias_core/probes/toy.py:1: toy-pairs"]
    assert stray_names(tmp_path, *names, owned, {("bias_core/report.py", "toy_share"): "why",
                                                 ("bias_core/metrics/toy.py", "toy_share"): "why",
                                                 ("*", "toy-pairs"): "why"}) == []


def test_the_checker_finds_a_test_of_a_names_shape():
    names = {"toy_share", "toy_proxy_share_gap"}
    source = ('def f(metric, g):\n    a = metric.startswith("toy_proxy")\n    b = "proxy" in metric\n'
              '    c = metric.endswith(("_gap", "x"))\n    d = "toy_share" in metric\n    e = "oxy" in g, "proxy" in g\n'
              '    return metric.removesuffix("_share_gap"), "proxy", a, b, c, d, e, g.name.endswith("gap")\n')
    # "proxy" in g: a word, and g not visibly a metric's name; g.name is
    assert shape_tests(source, names) == [(2, "toy_proxy"), (3, "proxy"), (4, "_gap"), (7, "_share_gap"), (7, "gap")]
    assert not is_fragment("toy_share", names) and not is_fragment("_", names) and is_fragment("share_", names)
