"""Toxicity and regard classifiers.

The Jigsaw BiLSTM port is checked against (a) a hand-written float64 numpy forward pass of the
Keras layers, reading the HDF5 file on its own, and (b) the outputs the package's author
published in its README (computed with TensorFlow). Hub classifiers are exercised on tiny local
models built here, and must fail with a clear message when the hub is off.
"""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from bias_core.classifiers import (
    REGARD_COLUMNS,
    ClassifierUnavailable,
    HubRegard,
    HubToxicity,
    JigsawBiLSTM,
    TextClassifier,
    VaderRegardProxy,
    get_regard,
    get_toxicity,
)
from bias_core.classifiers import keras_bilstm as kb
from bias_core.errors import AuditUsageError

from tolerances import Forward, assert_close, rounding_atol

FILES = kb.find_package_files()
needs_jigsaw = pytest.mark.skipif(
    FILES is None, reason=f"offline toxicity package not installed ({kb.INSTALL_HINT})"
)
try:
    import h5py
except ImportError:  # pragma: no cover - depends on the machine
    h5py = None
needs_h5py = pytest.mark.skipif(h5py is None, reason="h5py not installed (pip install h5py)")
try:
    import vaderSentiment  # noqa: F401

    HAVE_VADER = True
except ImportError:  # pragma: no cover
    HAVE_VADER = False
needs_vader = pytest.mark.skipif(not HAVE_VADER, reason="vaderSentiment not installed (pip install vaderSentiment==3.3.2)")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("BIAS_CORE_OFFLINE", "1")


@pytest.fixture(scope="module")
def jigsaw():
    if FILES is None or h5py is None:
        pytest.skip(f"offline toxicity classifier unavailable ({kb.INSTALL_HINT})")
    return JigsawBiLSTM(progress=False)


# ----- numpy reference of the Keras model --------------------------------------------------------
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _keras_lstm(x, kernel, recurrent, bias):
    """Keras 3 LSTMCell over time, float64: z = x K + h R + b split i, f, c, o."""
    units = recurrent.shape[0]
    h = np.zeros(units)
    c = np.zeros(units)
    out = []
    for x_t in x:
        z = x_t @ kernel + h @ recurrent + bias
        i, f, g, o = (z[k * units : (k + 1) * units] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        out.append(h)
    return np.array(out)


def _keras_reference(ids: np.ndarray) -> np.ndarray:
    with h5py.File(FILES.weights, "r") as f:
        w = lambda p: np.asarray(f[p][()], dtype=np.float64)  # noqa: E731
        emb = w("layers/embedding/vars/0")
        fwd = [w(f"layers/bidirectional/forward_layer/cell/vars/{k}") for k in range(3)]
        bwd = [w(f"layers/bidirectional/backward_layer/cell/vars/{k}") for k in range(3)]
        d1k, d1b = w("layers/dense/vars/0"), w("layers/dense/vars/1")
        d2k, d2b = w("layers/dense_1/vars/0"), w("layers/dense_1/vars/1")
    rows = []
    for seq in ids:
        x = emb[seq]
        forward = _keras_lstm(x, *fwd)
        # go_backwards, then flipped back to input order (Bidirectional with return_sequences)
        backward = _keras_lstm(x[::-1], *bwd)[::-1]
        pooled = np.concatenate([forward, backward], axis=1).max(axis=0)
        hidden = np.maximum(pooled @ d1k + d1b, 0.0)
        rows.append(_sigmoid(hidden @ d2k + d2b))
    return np.array(rows)


@needs_jigsaw
@needs_h5py
def test_port_matches_numpy_keras_reference(jigsaw):
    texts = ["You are so dumb and stupid!", "What a lovely garden, thank you.", "idiot " * 120, ""]
    ids = jigsaw.encode(texts)
    rng = np.random.default_rng(3)
    random_ids = rng.integers(0, kb.VOCAB_SIZE, size=(2, kb.MAXLEN)).astype(np.int32)
    expected = _keras_reference(np.concatenate([ids, random_ids]))
    got = np.concatenate([jigsaw.score_heads(texts), _run_ids(jigsaw, random_ids)])
    assert_close(got, expected, bilstm_atol(expected), kind="BiLSTM heads")


def bilstm_atol(probabilities) -> float:
    """The fp32 bound on the BiLSTM's sigmoid outputs: each logit goes through MAXLEN steps of
    sums over the embedding and the recurrent state, then the two dense layers; a probability
    moves by at most a quarter of its logit's error (the sigmoid's slope <= 1/4)."""
    p = np.clip(np.asarray(probabilities, dtype=np.float64), 1e-12, 1 - 1e-12)
    scale = float(np.max(np.abs(np.log(p / (1 - p)))))
    accumulated = kb.MAXLEN * (kb.EMBEDDING_DIM + kb.UNITS) + 2 * kb.UNITS + kb.HIDDEN
    return rounding_atol(accumulated, scale) / 4


def _run_ids(jigsaw, ids):
    import torch

    with torch.inference_mode():
        return jigsaw._net(torch.from_numpy(ids).long()).double().numpy()


@needs_jigsaw
@needs_h5py
def test_port_reproduces_outputs_published_by_the_package(jigsaw):
    # From the toxic-comment-classifier 0.3.0 README (its author's TensorFlow run).
    heads = jigsaw.score_heads(["You are so dumb and stupid!"])[0]
    published = [0.9889402985572815, 0.07256772369146347, 0.620429277420044, 0.01934845559298992, 0.8664075136184692, 0.04072948172688484]
    assert_close(heads, published, bilstm_atol(published), kind="published heads")
    means = {
        "I hate you so much!": 0.1395,
        "This is wonderful news.": 0.0013,
        "You're disgusting!": 0.3110,
        "Absolutely love your energy!": 0.0088,
        "You're the worst person ever!": 0.0937,
        "Have a nice day :)": 0.0115,
    }
    heads = jigsaw.score_heads(list(means))
    got = heads.mean(axis=1)  # the package's predict(): mean of six heads, published to 4 decimals
    assert_close(got, list(means.values()), 5e-5 + bilstm_atol(heads), kind="published means")


@needs_jigsaw
@needs_h5py
def test_toxicity_is_the_toxic_head_and_orders_obvious_cases(jigsaw):
    toxic = ["You are a stupid idiot.", "Shut up, you worthless moron!", "You are so dumb and stupid!"]
    neutral = ["The meeting starts at ten.", "She works as a nurse in the city.", "Thank you for the lovely dinner."]
    scores = jigsaw.score(toxic + neutral)
    np.testing.assert_array_equal(scores, jigsaw.score_heads(toxic + neutral)[:, 0])
    assert scores.dtype == np.float64 and np.all((scores >= 0) & (scores <= 1))
    assert scores[:3].min() > 0.5 > scores[3:].max()


# ----- preprocessing (Keras Tokenizer + pad_sequences) -------------------------------------------
@needs_jigsaw
@needs_h5py
def test_preprocessing_matches_keras_tokenizer(jigsaw):
    jigsaw.encode([])  # loads the tokenizer
    tok = jigsaw._tokenizer
    # lower-cased; punctuation, tab and newline split words; apostrophes stay inside words
    assert tok.text_to_word_sequence("Hello, WORLD!!  you're\tgreat\n") == ["hello", "world", "you're", "great"]
    # the vocabulary's most frequent words: 'the' 1, 'to' 2, 'of' 3, 'and' 4, 'a' 5
    ids = jigsaw.encode(["The, the AND a"])[0]
    assert ids.tolist() == [0] * 96 + [1, 1, 4, 5]
    # zeros in front, and a long text keeps its LAST 100 words (Keras "pre" truncation)
    long = jigsaw.encode(["to " * 50 + "of " * 99 + "and"])[0]
    assert long.tolist() == [3] * 99 + [4]
    assert jigsaw.encode([""]).tolist() == [[0] * 100]


@needs_jigsaw
def test_words_beyond_num_words_are_dropped():
    with FILES.tokenizer.open("rb") as fh:
        raw = vars(kb._TokenizerUnpickler(fh).load())
    assert raw["num_words"] == kb.VOCAB_SIZE and raw["oov_token"] is None
    rare = next(w for w, i in raw["word_index"].items() if i == 25000)
    tok = kb.KerasTokenizer.load(FILES.tokenizer)
    assert tok.texts_to_sequences([f"the {rare} a"]) == [[1, 5]]
    assert max(tok.word_index.values()) == kb.VOCAB_SIZE - 1


def test_tokenizer_unpickler_refuses_foreign_code(tmp_path):
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps(os.getcwd))
    with pytest.raises(pickle.UnpicklingError, match="not allowed"):
        kb.KerasTokenizer.load(path)


# ----- determinism and batching ------------------------------------------------------------------
@needs_jigsaw
@needs_h5py
def test_scores_do_not_depend_on_batching_or_order(jigsaw):
    texts = [f"text {i}: you are {'a stupid idiot' if i % 3 == 0 else 'kind'} " * (1 + i % 5) for i in range(45)]
    together = jigsaw.score(texts)
    one_by_one = np.concatenate([jigsaw.score([t]) for t in texts])
    perm = np.random.default_rng(0).permutation(len(texts))
    shuffled = np.empty_like(together)
    shuffled[perm] = jigsaw.score([texts[i] for i in perm])
    assert_close(one_by_one, together, bilstm_atol(together), kind="batch of one")
    assert_close(shuffled, together, bilstm_atol(together), kind="shuffled batches")
    np.testing.assert_array_equal(together, JigsawBiLSTM(progress=False).score(texts))  # same batches: same bits


@needs_jigsaw
def test_weights_load_only_on_first_use():
    clf = get_toxicity("offline")
    assert isinstance(clf, JigsawBiLSTM) and clf._net is None
    assert clf.fingerprint.startswith("jigsaw-bilstm:0.3.0:") and clf._net is None


# ----- VADER regard proxy ------------------------------------------------------------------------
@needs_vader
def test_vader_proxy_is_labelled_as_a_proxy():
    proxy = get_regard("offline")
    assert isinstance(proxy, VaderRegardProxy) and proxy.is_proxy
    assert "proxy" in proxy.name and "VADER" in proxy.name and proxy.name != "regard"
    assert "sentiment, not regard" in proxy.label
    assert HubRegard.is_proxy is False and HubToxicity.is_proxy is False and JigsawBiLSTM.is_proxy is False


@needs_vader
def test_vader_proxy_classes_hand_picked_sentences():
    proxy = VaderRegardProxy(progress=False)
    texts = ["She is a wonderful, kind doctor.", "He is a terrible, cruel liar.", "The man worked as a clerk.",
             "The woman was known for being brilliant."]
    expected = ["positive", "negative", "neutral", "positive"]
    out = proxy.score(texts)
    assert out.shape == (4, len(REGARD_COLUMNS))
    assert [REGARD_COLUMNS[k] for k in out.argmax(axis=1)] == expected
    np.testing.assert_array_equal(out.sum(axis=1), 1.0)
    np.testing.assert_array_equal(out[:, REGARD_COLUMNS.index("other")], 0.0)


@needs_vader
def test_vader_proxy_thresholds(monkeypatch):
    proxy = VaderRegardProxy(progress=False)
    compounds = {"a": 0.05, "b": 0.0499, "c": -0.05, "d": -0.0499, "e": 0.0}
    monkeypatch.setattr(proxy._analyzer, "polarity_scores", lambda t: {"compound": compounds[t], "pos": 0.0, "neu": 1.0, "neg": 0.0})
    out = proxy.score(list(compounds))
    assert [REGARD_COLUMNS[k] for k in out.argmax(axis=1)] == ["positive", "neutral", "negative", "neutral", "neutral"]


# ----- choosing a classifier ---------------------------------------------------------------------
def test_unknown_kind_names_the_choices():
    with pytest.raises(AuditUsageError, match="auto, hub, offline"):
        get_toxicity("perspective")
    with pytest.raises(AuditUsageError, match="unknown regard classifier 'vader'"):
        get_regard("vader")


def test_auto_uses_offline_when_online_is_off():
    assert isinstance(get_toxicity("auto"), JigsawBiLSTM)
    assert isinstance(get_regard("auto"), VaderRegardProxy)


def test_every_classifier_follows_the_protocol():
    made = [HubToxicity(progress=False), HubRegard(progress=False), VaderRegardProxy(progress=False)]
    if FILES is not None:
        made.append(JigsawBiLSTM(progress=False))
    for clf in made:
        assert isinstance(clf, TextClassifier), type(clf).__name__
        assert clf.fingerprint and clf.label and clf.columns in (("toxicity",), REGARD_COLUMNS)


def test_auto_uses_hub_when_reachable(monkeypatch):
    import bias_core.classifiers as clf

    monkeypatch.delenv("BIAS_CORE_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(clf, "reachable", lambda url: None)
    assert isinstance(get_toxicity("auto"), HubToxicity)
    assert isinstance(get_regard("auto"), HubRegard)
    monkeypatch.setattr(clf, "reachable", lambda url: "URLError: no route")
    assert isinstance(get_toxicity("auto"), JigsawBiLSTM)


@pytest.mark.parametrize("make", [HubToxicity, HubRegard])
def test_hub_classifiers_fail_clearly_offline(monkeypatch, make):
    # Imported before the patch: huggingface_hub reads HF_HUB_OFFLINE once, when first imported.
    from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: F401

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    clf = make(progress=False)
    with pytest.raises(ClassifierUnavailable, match=r"could not be loaded: online loading is off.*Fix: .*kind='offline'") as info:
        clf.score(["hello"])
    assert clf.model_id in str(info.value)


# ----- hub scorers on tiny local models ----------------------------------------------------------
def _tiny_classifier(tmp_path, id2label: dict[int, str]):
    torch = pytest.importorskip("torch")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + "she he is a the nurse doctor kind cruel very and was known".split()
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64, num_labels=len(id2label), id2label=id2label,
                        label2id={v: k for k, v in id2label.items()})
    model = BertForSequenceClassification(config).eval()
    tok.save_pretrained(tmp_path)
    model.save_pretrained(tmp_path)
    return tok, model


def classifier_atol(tok, model, texts) -> float:
    """A softmax probability moves by at most half its logits' error (its slopes are <= 1/2)."""
    return Forward.of(model, texts, tokenizer=tok).logit_atol() / 2


def _direct_probs(tok, model, text):
    import torch

    with torch.inference_mode():
        logits = model(**tok(text, return_tensors="pt")).logits[0].double()
    return torch.softmax(logits, dim=-1).numpy()


TINY_TEXTS = ["she is a nurse", "he is very very cruel and was known", "the doctor", "she is kind and the doctor is very kind",
              "he", "a nurse"] * 4


def test_hub_toxicity_on_tiny_local_model(tmp_path):
    tok, model = _tiny_classifier(tmp_path, {0: "nothate", 1: "hate"})
    clf = HubToxicity(model_id=str(tmp_path), progress=False)
    got = clf.score(TINY_TEXTS)
    expected = [_direct_probs(tok, model, t)[1] for t in TINY_TEXTS]
    assert_close(got, expected, classifier_atol(tok, model, TINY_TEXTS))
    np.testing.assert_array_equal(got, np.concatenate([clf.score([t]) for t in TINY_TEXTS]))
    with pytest.raises(ClassifierUnavailable, match="none named 'toxic'"):
        HubToxicity(model_id=str(tmp_path), positive_label="toxic", progress=False).score(["he"])


def test_hub_regard_reorders_labels_to_regard_columns(tmp_path):
    id2label = {0: "other", 1: "neutral", 2: "negative", 3: "positive"}
    tok, model = _tiny_classifier(tmp_path, id2label)
    got = HubRegard(model_id=str(tmp_path), progress=False).score(TINY_TEXTS[:6])
    order = [list(id2label.values()).index(c) for c in REGARD_COLUMNS]
    expected = np.array([_direct_probs(tok, model, t)[order] for t in TINY_TEXTS[:6]])
    assert_close(got, expected, classifier_atol(tok, model, TINY_TEXTS[:6]))
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)


def test_hub_regard_rejects_a_model_without_regard_labels(tmp_path):
    _tiny_classifier(tmp_path, {0: "nothate", 1: "hate"})
    with pytest.raises(ClassifierUnavailable, match="needs .*missing"):
        HubRegard(model_id=str(tmp_path), progress=False).score(["he"])
