"""The up-front check of ``--data-dir``: every published file the audits would read, checked
before any model loads (the loaders check again as they read, with the same counters)."""

from __future__ import annotations

from pathlib import Path

from bias_core.probes import bbq, crows_pairs, disclosure, discrim_eval, genderpair, stereoset
from bias_core.probes.published import (
    DATA_DIR,
    DEBIAS_TRAINING_CANDIDATES,
    GENDERCARE_CDA,
    Counter,
    cda_counts,
    check_published,
    predicate_counts,
    row_counts,
    sentence_counts,
)

ONE_COLUMN: dict[str, Counter] = {"rows": row_counts, "predicates": predicate_counts, "sentences": sentence_counts}

#: Each published --data-dir file (by name) -> the counter of the reader that reads it.
COUNTERS: dict[str, Counter] = {
    "crows_pairs_anonymized.csv": crows_pairs.crows_counts,
    **{f"group{g}_pairset.json": genderpair.pairset_counter(g) for g in genderpair.GROUPS},
    "stereoset_gender_intrasentence.csv": stereoset.gendercare_counts,
    "merged_3groups_ft_validate.json": cda_counts,
    "dev.json": stereoset.release_counts,
    "test.json": stereoset.release_counts,
    "Gender_identity.jsonl": bbq.bbq_counts,
    "explicit.jsonl": discrim_eval.discrim_counts,
    # the one-column files: what the table expects of them says which reader counts them
    **{name: counter for name, spec in DATA_DIR.items() for unit, counter in ONE_COLUMN.items()
       if set(spec.counts) == {unit}},
}


def check_file(path: Path) -> str | None:
    """``check_published`` with the counter of the file's name (a name not published: None)."""
    count = COUNTERS.get(Path(path).name)
    return None if count is None else check_published(path, count)


def check_data_dir(data_dir: Path) -> list[str]:
    """Check every published file the audits would read from ``data_dir``, before any model
    loads. Returns the notices for valid but modified copies."""
    groups: list[list[str]] = [
        crows_pairs.CANDIDATES, bbq.CANDIDATES, discrim_eval.CANDIDATES, stereoset.RELEASE_CANDIDATES,
        stereoset.GENDERCARE_CANDIDATES, [GENDERCARE_CDA],
        *[genderpair._published_candidates(g) for g in genderpair.GROUPS],
        *[[f"Debias-LLMs/{w}_neutral_test.csv", f"{w}_neutral_test.csv"] for w in disclosure.NATURAL_SETS],
        *[[f"Debias-LLMs/{f}", f] for f in disclosure.LLM_SETS.values()],
        *[[rel] for group in DEBIAS_TRAINING_CANDIDATES for rel in group],
    ]
    notices = []
    for candidates in groups:
        for rel in candidates:
            path = Path(data_dir) / rel
            if path.is_file():
                notice = check_file(path)
                if notice:
                    notices.append(notice)
                break  # the loaders read the first one found
    return notices
