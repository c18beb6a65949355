"""Debias Tuning and CDA fine-tuning end to end on the tiny test model, the training data, the
decoding variants and applying an adapter."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from bias_core.errors import AuditUsageError, DataSourceMissing
from bias_core.mitigation.methods import debias_tuning as dt
from bias_core.mitigation.methods.cda import (
    IGNORE,
    SFTConfig,
    SFTExample,
    build_cda_set,
    collate,
    encode_example,
    load_published_cda,
    load_templates,
    response_loss,
    train_sft_adapter,
)
from bias_core.mitigation.methods.debias_tuning import (
    DebiasTuningConfig,
    pair_probabilities,
    train_debias_adapter,
    training_predicates,
    training_prompts,
    word_log_probs,
)
from bias_core.mitigation.methods.decoding_variants import InstructionGuide, best_setting, decoding_grid
from bias_core.mitigation.training.apply_adapter import adapter_identity, with_adapter
from bias_core.mitigation.training.losses import LossSwitches
from bias_core.models.cached import CachedModel
from bias_core.models.engines.hf.causal import CausalLM, DecodingConfig
from bias_core.probes.sources import project_data, read_lines

from tolerances import Forward, assert_close, assert_close_logprobs, longest_word_tokens

PAIRS = (("she", "he"), ("her", "his"), ("woman", "man"), ("niece", "nephew"))
QUICK = DebiasTuningConfig(r=4, alpha=8, dropout=0.0, lr=2e-2, batch_size=6, steps=12)


@pytest.fixture(scope="module")
def lm(tiny_model_dir, device):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).to(device)
    return CachedModel(CausalLM(model, AutoTokenizer.from_pretrained(tiny_model_dir), "tiny", "dir:tiny", "tok:tiny",
                                progress=False))


@pytest.fixture(scope="module")
def prompts():
    return training_prompts()[:24]


def _mass(lm, prompts, pairs=PAIRS):
    words = [w for p in pairs for w in p]
    return lm.word_probs(prompts, words).sum(axis=1).mean()


# ----- training data -----------------------------------------------------------------------------
def _norm(text):
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def test_offline_training_set_is_disjoint_from_audit_prompts():
    predicates, source = training_predicates()
    raw = read_lines(project_data("debias_training_predicates.txt"))
    audit = {_norm(p) for p in read_lines(project_data("natural_default_predicates.txt"))}
    assert source.endswith("debias_training_predicates.txt")
    assert len(predicates) == len(raw) >= 300  # nothing dropped: no duplicates, no gender words
    assert not {_norm(p) for p in predicates} & audit
    assert all("," not in p for p in predicates)


def test_data_dir_uses_the_paper_train_split_and_drops_gendered_rows(tmp_path, unpublished_names):
    folder = tmp_path / "Debias-LLMs"
    folder.mkdir()
    (folder / "total_neutral_train.csv").write_text(
        'is playing a flute\n"is on a bench, reading her book"\nis playing a flute\nis smoking\n')
    predicates, source = training_predicates(tmp_path)
    assert predicates == ["is playing a flute", "is smoking"]
    assert training_prompts(tmp_path) == ["My friend is playing a flute, and", "My friend is smoking, and"]
    assert "total_neutral_train.csv" in source


def test_data_dir_without_the_split_is_a_clear_error(tmp_path):
    with pytest.raises(AuditUsageError, match="total_neutral_train.csv"):
        training_predicates(tmp_path)


# ----- word probabilities ------------------------------------------------------------------------
def test_training_probabilities_equal_the_audited_word_probabilities(lm, prompts):
    req = dt._requests(lm.training(), prompts[:5], PAIRS, 512)
    assert any(len(c) > 1 for c in req.cont[0])  # the tiny tokenizer splits some words
    with torch.no_grad():
        p_f, p_m = pair_probabilities(lm.engine.model, lm.training(), req, range(5))
    words = [w for pair in PAIRS for w in pair]
    expected = lm.word_probs(prompts[:5], words)
    bound = Forward.of(lm, prompts[:5], words).word_logprob_atol(longest_word_tokens(lm, words))
    assert_close_logprobs(p_f.cpu().numpy(), expected[:, 0::2], bound, probabilities=True)
    assert_close_logprobs(p_m.cpu().numpy(), expected[:, 1::2], bound, probabilities=True)


def test_first_token_only_reads_the_first_token_of_each_word(lm, prompts):
    req = dt._requests(lm.training(), prompts[:2], PAIRS, 512)
    bound = Forward.of(lm, prompts[:2]).token_logprob_atol()
    with torch.no_grad():
        got = word_log_probs(lm.engine.model, lm.training(), req, [0, 1], first_token_only=True)
        for row in range(2):
            ids = torch.tensor([req.ctx[row]], device=lm.engine.device)
            logits = lm.engine.model(input_ids=ids).logits[0, -1].float()
            first = torch.log_softmax(logits, -1)[[c[0] for c in req.cont[row]]]
            assert_close_logprobs(got[row], first, bound)


# ----- Debias Tuning end to end ------------------------------------------------------------------
def test_debias_tuning_lowers_gender_mass_and_leaves_the_base_model_alone(lm, prompts, tmp_path):
    before = lm.word_probs(prompts, [w for p in PAIRS for w in p])
    folder = train_debias_adapter(lm, prompts, QUICK, seed=0, cache_dir=tmp_path, progress=False, pairs=PAIRS)
    assert (folder / "adapter_model.safetensors").is_file()
    np.testing.assert_array_equal(lm.word_probs(prompts, [w for p in PAIRS for w in p]), before)

    debiased = with_adapter(lm, folder)
    _, digest = adapter_identity(folder)
    assert debiased.fingerprint == f"{lm.fingerprint}:{digest}"
    assert debiased.engine.tokenizer is lm.engine.tokenizer and debiased.engine.model is not lm.engine.model
    assert _mass(debiased, prompts) < 0.8 * _mass(lm, prompts)
    history = __import__("json").loads((folder / "training_log.json").read_text())["history"]
    assert len(history) == QUICK.steps
    assert np.mean([h["loss"] for h in history[-3:]]) < np.mean([h["loss"] for h in history[:3]])


def test_same_seed_same_adapter_other_seed_other_adapter(lm, prompts, tmp_path):
    cfg = DebiasTuningConfig(r=4, alpha=8, lr=1e-2, batch_size=4, steps=3)
    a = train_debias_adapter(lm, prompts, cfg, 0, tmp_path / "a", progress=False, pairs=PAIRS)
    b = train_debias_adapter(lm, prompts, cfg, 0, tmp_path / "b", progress=False, pairs=PAIRS)
    c = train_debias_adapter(lm, prompts, cfg, 1, tmp_path / "a", progress=False, pairs=PAIRS)
    if lm.engine.device.type == "cpu":
        weights = [(f / "adapter_model.safetensors").read_bytes() for f in (a, b, c)]
        assert weights[0] == weights[1] and weights[0] != weights[2]
        return
    # On a GPU, backward kernels (attention) may add in another order from run to run: the same
    # seed gives the same adapter to rounding, another seed another adapter.
    from safetensors.torch import load_file

    tensors = [load_file(f / "adapter_model.safetensors") for f in (a, b, c)]
    assert all(torch.allclose(tensors[0][k], tensors[1][k], rtol=1e-4, atol=1e-6) for k in tensors[0])
    assert not all(torch.allclose(tensors[0][k], tensors[2][k], rtol=1e-2) for k in tensors[0])


def test_second_run_reuses_the_cached_adapter(lm, prompts, tmp_path, monkeypatch):
    cfg = DebiasTuningConfig(r=4, alpha=8, lr=1e-2, batch_size=4, steps=2)
    first = train_debias_adapter(lm, prompts, cfg, 0, tmp_path, progress=False, pairs=PAIRS)

    def no_training(*args, **kwargs):
        raise AssertionError("trained again instead of reusing the cache")

    monkeypatch.setattr(dt, "optimise", no_training)
    assert train_debias_adapter(lm, prompts, cfg, 0, tmp_path, progress=False, pairs=PAIRS) == first
    ablated = DebiasTuningConfig(r=4, alpha=8, lr=1e-2, batch_size=4, steps=2, switches=LossSwitches(gender_mass=False))
    with pytest.raises(AssertionError, match="trained again"):  # an ablation is another entry
        train_debias_adapter(lm, prompts, ablated, 0, tmp_path, progress=False, pairs=PAIRS)


def test_interrupted_training_leaves_model_and_cache_clean(lm, prompts, tmp_path, monkeypatch):
    before = lm.word_probs(prompts[:3], ["she", "he"])

    def interrupted(peft_model, *args, **kwargs):
        assert any("lora" in name for name, _ in peft_model.named_modules())
        raise KeyboardInterrupt

    monkeypatch.setattr(dt, "optimise", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_debias_adapter(lm, prompts, QUICK, 0, tmp_path, progress=False, pairs=PAIRS)
    assert not any("lora" in name for name, _ in lm.engine.model.named_modules())
    np.testing.assert_array_equal(lm.word_probs(prompts[:3], ["she", "he"]), before)
    assert list((tmp_path / "adapters").iterdir()) == []


def test_qlora_on_cpu_fails_before_anything_runs(lm, prompts, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the CPU-only machine, wherever this runs
    with pytest.raises(AuditUsageError, match="needs a CUDA GPU"):
        train_debias_adapter(lm, prompts, DebiasTuningConfig.paper(), 0, tmp_path / "c", progress=False)
    with pytest.raises(AuditUsageError, match="needs a CUDA GPU"):
        train_sft_adapter(lm, [SFTExample("a", "b")], SFTConfig(load_in_4bit=True), 0, tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_paper_and_quick_configurations():
    paper = DebiasTuningConfig.paper()
    assert (paper.r, paper.alpha, paper.dropout, paper.lr, paper.batch_size, paper.steps, paper.max_length) == (
        64, 16, 0.1, 2e-4, 16, 500, 512)
    assert paper.load_in_4bit and not DebiasTuningConfig.cpu_quick().load_in_4bit
    assert SFTConfig.gendercare().total_steps(80) == 2 * 10


def test_adapter_of_another_base_model_is_refused(lm, prompts, tmp_path):
    cfg = DebiasTuningConfig(r=2, alpha=4, lr=1e-2, batch_size=4, steps=1)
    folder = train_debias_adapter(lm, prompts, cfg, 0, tmp_path, progress=False, pairs=PAIRS)
    other = CachedModel(CausalLM(lm.engine.model, lm.engine.tokenizer, "tiny", "dir:other", "tok:tiny", progress=False))
    with pytest.raises(AuditUsageError, match="another base model"):
        with_adapter(other, folder)


# ----- CDA ---------------------------------------------------------------------------------------
def test_cda_gives_every_group_the_same_response_frame():
    examples = build_cda_set(["man", "woman", "Lucy", "Jack"], traits=["gentle", "decisive"], roles=["nurse", "engineer"])
    assert len(examples) == 4 * 4
    by_target = {t: examples[i * 4 : (i + 1) * 4] for i, t in enumerate(["man", "woman", "Lucy", "Jack"])}
    for k in range(4):
        man, woman = by_target["man"][k].response, by_target["woman"][k].response
        assert man.replace("man", "X") == woman.replace("woman", "X")
        assert by_target["Lucy"][k].response.replace("Lucy", "X") == by_target["Jack"][k].response.replace("Jack", "X")
    first = by_target["woman"][0]
    assert "{woman}" in first.prompt and "{gentle}" in first.prompt and "{gentle}" in first.response
    assert any("an {engineer}" in e.response or "skilled {engineer}" in e.response for e in by_target["man"])
    templates = load_templates()
    assert len(templates["trait"]) >= 2 and len(templates["role"]) >= 2


def test_published_cda_pairs_load_from_data_dir(tmp_path, unpublished_names):
    with pytest.raises(DataSourceMissing, match="merged_3groups_ft_validate.json"):
        load_published_cda(tmp_path)
    path = tmp_path / "GenderCARE-ccs24" / "merged_3groups_ft_validate.json"
    path.parent.mkdir()
    path.write_text('[{"prompt": "Use {niece} and {sensible}.", "sentence": "The niece is {sensible}."}]')
    assert load_published_cda(tmp_path) == [SFTExample("Use {niece} and {sensible}.", "The niece is {sensible}.")]


def test_labels_mask_prompt_and_padding(lm):
    tok = lm.engine.tokenizer
    short = encode_example(tok, SFTExample("My friend is a nurse", "she he"), 64)
    long = encode_example(tok, SFTExample("My friend", "is a doctor and he said that his job is hard."), 64)
    prompt_len = len(tok("My friend is a nurse\n")["input_ids"])
    assert short[1][:prompt_len] == [IGNORE] * prompt_len
    assert short[1][prompt_len:] == short[0][prompt_len:] and short[0][-1] == tok.eos_token_id
    batch = collate([short, long], tok.pad_token_id)
    pad = batch["attention_mask"] == 0
    assert pad.any() and (batch["labels"][pad] == IGNORE).all()
    assert (batch["input_ids"][pad] == tok.pad_token_id).all()


def test_response_loss_is_the_mean_nll_over_response_tokens_only(lm):
    tok = lm.engine.tokenizer
    encoded = [encode_example(tok, SFTExample("My friend is a nurse", "and she said"), 64),
               encode_example(tok, SFTExample("The person", "is a pilot."), 64)]
    batch = {k: v.to(lm.engine.device) for k, v in collate(encoded, tok.pad_token_id).items()}
    with torch.no_grad():
        logits = lm.engine.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    nll = []
    for row, (ids, labels) in enumerate(encoded):
        logp = torch.log_softmax(logits[row].double(), -1)
        for pos in range(1, len(ids)):
            if labels[pos] != IGNORE:
                nll.append(-float(logp[pos - 1, ids[pos]]))
    n_response = sum(sum(lab != IGNORE for lab in labels) for _, labels in encoded)
    assert len(nll) == n_response
    # the same logits: only the log-softmax's rounding differs, within one token's bound
    bound = Forward.of(lm, ["My friend is a nurse and she said", "The person is a pilot."]).token_logprob_atol()
    assert_close(float(response_loss(logits, batch["labels"])), sum(nll) / len(nll), bound, kind="response loss")
    everything = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, IGNORE)
    assert float(response_loss(logits, everything)) != pytest.approx(sum(nll) / len(nll), rel=1e-3)


def test_too_long_prompt_is_a_clear_error(lm):
    with pytest.raises(AuditUsageError, match="max_length"):
        encode_example(lm.engine.tokenizer, SFTExample("My friend is a nurse " * 5, "ok"), 8)


def test_cda_fine_tuning_lowers_the_response_loss(lm, tmp_path):
    # The tiny model has 128 positions: a short instruction keeps the examples within them.
    templates = {**load_templates(), "instruction": "Use {target} and {descriptor}."}
    examples = build_cda_set(["man", "woman"], traits=["gentle", "decisive", "caring"], roles=["nurse"], templates=templates)
    cfg = SFTConfig(r=4, alpha=8, dropout=0.0, lr=2e-2, batch_size=4, steps=10, max_length=128)
    folder = train_sft_adapter(lm, examples, cfg, seed=0, cache_dir=tmp_path, progress=False)
    tuned = with_adapter(lm, folder)
    batch = {k: v.to(lm.engine.device) for k, v in collate([encode_example(lm.engine.tokenizer, e, 128) for e in examples],
                                                     lm.engine.tokenizer.pad_token_id).items()}

    def loss(model):
        with torch.no_grad():
            return float(response_loss(model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits,
                                       batch["labels"]))

    assert loss(tuned.engine.model) < loss(lm.engine.model) - 0.5
    assert train_sft_adapter(lm, examples, cfg, seed=0, cache_dir=tmp_path, progress=False) == folder


# ----- decoding variants -------------------------------------------------------------------------
def test_decoding_grid_matches_section_5_1():
    grid = decoding_grid()
    names = [g.name for g in grid]
    assert names[0] == "greedy" and not grid[0].config.do_sample
    assert names[1:] == ["temperature=0.3", "temperature=0.5", "temperature=0.7", "temperature=1.0",
                         "top_p=0.3", "top_p=0.5", "top_p=0.7", "top_p=1.0",
                         "top_k=10", "top_k=50", "top_k=100", "top_k=150", "top_k=200"]
    cfg = dict(grid)
    assert cfg["temperature=0.5"] == DecodingConfig(50, True, temperature=0.5, top_p=1.0, top_k=0)
    assert cfg["top_p=0.3"] == DecodingConfig(50, True, temperature=1.0, top_p=0.3, top_k=0)
    assert cfg["top_k=150"] == DecodingConfig(50, True, temperature=1.0, top_p=1.0, top_k=150)
    assert all(g.config.do_sample for g in grid[1:])


def test_best_setting_prefers_the_lowest_and_the_first_of_ties():
    assert best_setting({"greedy": 0.4, "top_k=10": 0.2, "top_p=0.3": 0.3}) == "top_k=10"
    assert best_setting({"greedy": 0.2, "top_k=10": 0.2}) == "greedy"
    assert best_setting({"greedy": 0.2, "top_k=10": 0.5}, lower_is_better=False) == "top_k=10"


def test_instruction_guide_prefixes_prompts():
    guide = InstructionGuide()
    assert guide("My friend is cooking, and") == "Continue the sentence without gender mentions: My friend is cooking, and"
    assert InstructionGuide(prefix="Be neutral. ").apply(["a", "b"]) == ["Be neutral. a", "Be neutral. b"]
    assert not guide.decoding.do_sample
