"""Toxicity scorers: probability that a text is toxic, in [0, 1].

- ``HubToxicity``: GenderCARE's classifier, ``facebook/roberta-hate-speech-dynabench-r4-target``
  (also the default of Hugging Face ``evaluate``'s toxicity measurement): the probability of
  its "hate" label.
- ``JigsawBiLSTM``: offline, the Jigsaw BiLSTM shipped in ``toxic-comment-classifier``: the
  probability of its "toxic" head. Not the package's own ``predict()``, which averages all six
  heads (toxic, severe_toxic, ...): that mean is no probability of anything, e.g. 0.43 for a
  text its toxic head scores 0.99.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from bias_core.classifiers import keras_bilstm as kb
from bias_core.classifiers.base import ClassifierUnavailable, run_in_fixed_blocks
from bias_core.classifiers.hub import HubLabelProbs
from bias_core.models.progress import progress_bar

HUB_TOXICITY_MODEL = "facebook/roberta-hate-speech-dynabench-r4-target"
# Bump when a code change here moves the numbers, so cached scores stop matching.
CODE_VERSION = 1


class HubToxicity:
    is_proxy = False
    stand_in = ""
    columns = ("toxicity",)

    def __init__(self, model_id: str = HUB_TOXICITY_MODEL, revision: str | None = None, device: str = "cpu",
                 progress: bool = True, positive_label: str = "hate"):
        self.model_id = model_id
        self.revision = revision
        self.positive_label = positive_label
        self.name = f"hub-toxicity({model_id})"
        self.label = f"probability of the '{positive_label}' label of {model_id}"
        self._probs = HubLabelProbs(model_id, revision=revision, device=device, progress=progress)

    @property
    def fingerprint(self) -> str:
        # Pin `revision` for reproducible caches: an unpinned id follows the hub's main branch.
        return f"hub-toxicity:{self.model_id}@{self.revision or 'main'}:v{CODE_VERSION}"

    def score(self, texts: Sequence[str], desc: str = "toxicity") -> np.ndarray:
        if not texts:
            return np.zeros(0, dtype=np.float64)
        labels, probs = self._probs.probs(texts, desc)
        if self.positive_label not in labels:
            raise ClassifierUnavailable(f"{self.model_id} has labels {labels}, none named {self.positive_label!r}; "
                                        "pass positive_label= one of them.")
        return probs[:, labels.index(self.positive_label)]


class JigsawBiLSTM:
    is_proxy = False
    stand_in = "offline Jigsaw BiLSTM"  # not GenderCARE's classifier: reports name it beside its numbers
    columns = ("toxicity",)
    name = "jigsaw-bilstm"
    label = "probability of the 'toxic' head of the Jigsaw BiLSTM (toxic-comment-classifier 0.3.0)"
    # Fixed block height: see run_in_fixed_blocks.
    BLOCK_ROWS = 32

    def __init__(self, progress: bool = True):
        self.progress = progress
        self._tokenizer: kb.KerasTokenizer | None = None
        self._net = None

    @functools.cached_property
    def files(self) -> kb.PackageFiles:
        files = kb.find_package_files()
        if files is None:
            raise ClassifierUnavailable(f"offline toxicity classifier: package {kb.PACKAGE!r} is not installed; {kb.INSTALL_HINT}.")
        return files

    @functools.cached_property
    def fingerprint(self) -> str:
        return f"jigsaw-bilstm:{self.files.version}:{kb.files_digest(self.files)}:v{CODE_VERSION}"

    def _load(self) -> None:
        if self._net is not None:
            return
        try:
            import h5py  # noqa: F401
        except ImportError as exc:
            raise ClassifierUnavailable(f"offline toxicity classifier needs h5py to read its weights; {kb.INSTALL_HINT}.") from exc
        self._tokenizer = kb.KerasTokenizer.load(self.files.tokenizer)
        self._net = kb.build_torch_model(kb.read_keras_weights(self.files.weights))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Model input ids exactly as the package's ``classify`` makes them: Keras Tokenizer
        ``texts_to_sequences`` on the raw text (the package's ``clean_text`` is never called
        there), then ``pad_sequences(maxlen=100)``."""
        self._load()
        return kb.pad_sequences(self._tokenizer.texts_to_sequences(list(texts)))

    def score_heads(self, texts: Sequence[str], desc: str = "toxicity (jigsaw)") -> np.ndarray:
        """All six head probabilities, float64 (n, 6), columns in keras_bilstm.LABELS order."""
        import torch

        if not texts:
            return np.zeros((0, len(kb.LABELS)), dtype=np.float64)
        ids = torch.from_numpy(self.encode(texts)).long()

        def block(idx: list[int]) -> np.ndarray:
            with torch.inference_mode():
                return self._net(ids[idx]).double().numpy()

        bar = progress_bar(total=len(ids), desc=desc, enabled=self.progress)
        try:
            return np.stack(run_in_fixed_blocks(len(ids), self.BLOCK_ROWS, block, bar))
        finally:
            bar.close()

    def score(self, texts: Sequence[str], desc: str = "toxicity (jigsaw)") -> np.ndarray:
        return self.score_heads(texts, desc)[:, kb.LABELS.index("toxic")]
