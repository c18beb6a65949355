"""Regard scorers: per text, probabilities of the columns ``REGARD_COLUMNS``
(positive, negative, neutral, other).

- ``HubRegard``: ``sasha/regardv3`` (Sheng et al. 2019's regard classifier, as Hugging Face
  ``evaluate``'s regard measurement and GenderCARE use it): softmax over its four labels.
- ``VaderRegardProxy``: offline stand-in. It measures *sentiment* (VADER), not regard (how a
  text regards the person it is about), and says so in its name and label. Each text gets one
  class from VADER's compound score with the thresholds VADER's authors recommend:
  compound >= 0.05 positive, compound <= -0.05 negative, else neutral; never "other". The
  output is one-hot, so a group's mean is the share of its texts in each class.
"""

from __future__ import annotations

import functools
import importlib.metadata
from typing import Sequence

import numpy as np

from bias_core.classifiers.base import REGARD_COLUMNS, ClassifierUnavailable
from bias_core.classifiers.hub import HubLabelProbs
from bias_core.models.progress import progress_bar

HUB_REGARD_MODEL = "sasha/regardv3"
VADER_POSITIVE_AT = 0.05
VADER_NEGATIVE_AT = -0.05
CODE_VERSION = 1


class HubRegard:
    is_proxy = False
    stand_in = ""
    columns = REGARD_COLUMNS
    label = "regard (Sheng et al. 2019) class probabilities from sasha/regardv3"

    def __init__(self, model_id: str = HUB_REGARD_MODEL, revision: str | None = None, device: str = "cpu", progress: bool = True):
        self.model_id = model_id
        self.revision = revision
        self.name = f"regard({model_id})"
        self._probs = HubLabelProbs(model_id, revision=revision, device=device, progress=progress)

    @property
    def fingerprint(self) -> str:
        return f"hub-regard:{self.model_id}@{self.revision or 'main'}:v{CODE_VERSION}"

    def score(self, texts: Sequence[str], desc: str = "regard") -> np.ndarray:
        if not texts:
            return np.zeros((0, len(REGARD_COLUMNS)), dtype=np.float64)
        labels, probs = self._probs.probs(texts, desc)
        missing = [c for c in REGARD_COLUMNS if c not in labels]
        if missing:
            raise ClassifierUnavailable(f"{self.model_id} has labels {labels}; a regard model needs {REGARD_COLUMNS} (missing {missing}).")
        return probs[:, [labels.index(c) for c in REGARD_COLUMNS]]


class VaderRegardProxy:
    is_proxy = True
    stand_in = "VADER proxy"
    columns = REGARD_COLUMNS
    name = "regard_proxy(VADER sentiment)"
    label = (
        "VADER sentiment class used as a proxy for regard (sentiment, not regard): "
        f"compound >= {VADER_POSITIVE_AT} positive, <= {VADER_NEGATIVE_AT} negative, else neutral; 'other' is never assigned"
    )

    @functools.cached_property
    def _analyzer(self):
        try:
            from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
        except ImportError as exc:
            raise ClassifierUnavailable("offline regard proxy: package 'vaderSentiment' is not installed; "
                                        "pip install 'vaderSentiment==3.3.2'.") from exc
        return SentimentIntensityAnalyzer()

    @functools.cached_property
    def fingerprint(self) -> str:
        try:
            version = importlib.metadata.version("vaderSentiment")
        except importlib.metadata.PackageNotFoundError:
            version = "missing"
        return f"vader-regard-proxy:{version}:{VADER_POSITIVE_AT}:{VADER_NEGATIVE_AT}:v{CODE_VERSION}"

    def __init__(self, progress: bool = True):
        self.progress = progress

    def sentiment(self, texts: Sequence[str], desc: str = "VADER sentiment") -> np.ndarray:
        """VADER's raw scores, float64 (n, 4): compound, pos, neu, neg (for per-item details)."""
        bar = progress_bar(total=len(texts), desc=desc, enabled=self.progress)
        rows = []
        try:
            for t in texts:
                rows.append(self._analyzer.polarity_scores(t))
                bar.update(1)
        finally:
            bar.close()
        return np.array([[r["compound"], r["pos"], r["neu"], r["neg"]] for r in rows], dtype=np.float64).reshape(len(rows), 4)

    def score(self, texts: Sequence[str], desc: str = "regard proxy (VADER)") -> np.ndarray:
        compound = self.sentiment(texts, desc)[:, 0]
        out = np.zeros((len(compound), len(REGARD_COLUMNS)), dtype=np.float64)
        col = REGARD_COLUMNS.index
        out[compound >= VADER_POSITIVE_AT, col("positive")] = 1.0
        out[compound <= VADER_NEGATIVE_AT, col("negative")] = 1.0
        out[(compound > VADER_NEGATIVE_AT) & (compound < VADER_POSITIVE_AT), col("neutral")] = 1.0
        return out
