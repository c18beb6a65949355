"""A tiny randomly initialised Llama causal LM with a locally trained byte-level BPE tokenizer.

Built entirely offline (no hub): the tokenizer is trained with the ``tokenizers`` library on a
small in-code corpus, the model is ``LlamaForCausalLM`` from a config. Both are saved with
``save_pretrained`` into one folder, so the folder loads like any Hugging Face model directory
(``--model ./that/folder``). The same seed gives byte-identical files. Beside it: tiny masked
LMs and BART, and a random LoRA adapter for any of them (``save_lora``).
"""

from __future__ import annotations

import json
from pathlib import Path

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
VOCAB_SIZE = 400

_SUBJECTS = ["My friend", "My neighbour", "The person", "My cousin", "Our colleague"]
_OCCUPATIONS = ["nurse", "doctor", "teacher", "engineer", "secretary", "mechanic", "dancer", "pilot"]
_PRONOUNS = [("she", "her"), ("he", "his"), ("she", "her"), ("he", "his")]

CORPUS = [
    f"{subject} is a {occupation}, and {subj} said that {poss} job is hard."
    for subject in _SUBJECTS
    for occupation in _OCCUPATIONS
    for subj, poss in _PRONOUNS
] + [
    "My friend is a nurse, and she he her his they them.",
    "She said he would come. He said she would come. Her book, his book.",
    "The man and the woman, the boy and the girl, the father and the mother.",
    "My friend likes to read books, and he likes to paint.",
]


def build_tokenizer():
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on CORPUS (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[BOS, EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    # Like Llama: every encoded text starts with BOS when special tokens are added.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD, model_max_length=128
    )


def build_tiny_causal_lm(path: str | Path, seed: int = 0, hidden_size: int = 32, context: int = 128) -> Path:
    """Write a tiny random LlamaForCausalLM and its tokenizer to ``path``; return the folder.
    (bitsandbytes quantizes in blocks of 64: a 4-bit test model needs hidden_size >= 64.)
    ``context``: its positions; BBQ's and discrim-eval's real prompts need 1,024 (691 tokens here)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=context,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    # Seed a private generator state so building does not disturb the caller's RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        # The default init (std 0.02) gives near-uniform next-token distributions; a larger std
        # makes distributions peaked enough that greedy decoding and batch effects are visible.
        with torch.no_grad():
            for param in model.parameters():
                if param.dim() > 1:
                    param.normal_(0.0, 0.2)
    model.eval()
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


# ----- masked LMs --------------------------------------------------------------------------------
MASK_CORPUS = CORPUS + [
    "The nurse said that she was tired. The doctor said that he was tired.",
    "He is a good person. She is a good person. They are good people.",
    "The engineer fixed the car, and the mechanic paid for it.",
]


def _randomise(model, seed: int) -> None:
    """Seeded weights with a larger std than the default init, for peaked distributions."""
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() > 1:
                param.normal_(0.0, 0.2)


def build_wordpiece_tokenizer():
    """A BERT (uncased WordPiece) tokenizer whose vocabulary comes from MASK_CORPUS.

    The vocabulary is made by rule, not by ``WordPieceTrainer``: that trainer breaks ties
    between equally frequent merges in hash order, so its vocabulary changed from run to run.
    Every corpus word is one token; any other word splits into the pieces below or letters
    ("nurses" -> nurse ##s, "hairdresser" -> hair ##dress ##er).
    """
    import string

    from tokenizers import normalizers, pre_tokenizers
    from transformers import BertTokenizer

    normalizer, splitter = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    words = sorted({w for text in MASK_CORPUS for w, _ in splitter.pre_tokenize_str(normalizer.normalize_str(text))})
    letters = sorted(set(string.ascii_lowercase) | {c for w in words for c in w})
    pieces = ["hair", "##dress", "##er", "##s"]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + letters + ["##" + c for c in letters] + words + pieces
    vocab = {tok: i for i, tok in enumerate(dict.fromkeys(tokens))}
    # The transformers class brings BERT's own post-processor ([CLS] ... [SEP]) and mask handling.
    return BertTokenizer(vocab=vocab, do_lower_case=True, model_max_length=128)


def build_bart_tokenizer(vocab_size: int = 400):
    """A BART (byte-level BPE, ``<mask>`` with lstrip) tokenizer trained on MASK_CORPUS."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers
    from transformers import BartTokenizer

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(MASK_CORPUS, trainer=trainer)
    saved = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in saved["merges"]]
    # As in facebook/bart-base: "<mask>" swallows the space before it, so "a <mask>." asks for
    # the leading-space form of the word.
    mask = AddedToken("<mask>", lstrip=True, rstrip=False, special=True, normalized=False)
    return BartTokenizer(vocab=saved["vocab"], merges=merges, mask_token=mask, model_max_length=128)


def build_tiny_masked_lm(path: str | Path, seed: int = 0) -> Path:
    """Write a tiny random BertForMaskedLM and its WordPiece tokenizer to ``path``; same seed,
    byte-identical files."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_wordpiece_tokenizer()
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertForMaskedLM(config)
        _randomise(model, seed)
    model.eval()
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def build_tiny_bart(path: str | Path, seed: int = 0) -> Path:
    """Write a tiny random BartForConditionalGeneration and its byte-level BPE tokenizer to
    ``path``; same seed, byte-identical files."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_bart_tokenizer()
    config = BartConfig(
        vocab_size=len(tokenizer), d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.eos_token_id,
        forced_eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BartForConditionalGeneration(config)
        _randomise(model, seed)
    model.eval()
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def with_eos_bias(model, eos_id: int, bias: float):
    """A copy of a causal LM whose output layer adds ``bias`` to the EOS logit.

    Random weights almost never pick EOS; with the bias a row ends at the first step where
    its own EOS logit comes within ``bias`` of the best other token, so rows of one batch end at
    different steps, decided by their own logits alone.
    """
    import copy

    import torch

    model = copy.deepcopy(model)
    head = model.get_output_embeddings()
    biased = torch.nn.Linear(head.in_features, head.out_features, bias=True,
                             device=head.weight.device, dtype=head.weight.dtype)
    with torch.no_grad():
        biased.weight.copy_(head.weight)
        biased.bias.zero_()
        biased.bias[eos_id] = bias
    model.set_output_embeddings(biased)
    return model


def audit_rows(pytester, model_dir: Path, cache_dir: Path, keyword: str) -> tuple[dict[str, dict], str]:
    """The repo's audits and thresholds.toml run on ``model_dir`` in a pytester folder (``-k
    keyword``): the run's results.json rows by test id, and pytest's output (for messages)."""
    from harness import copy_project, last_run, rows_by_id

    copy_project(pytester.path)
    result = pytester.runpytest_subprocess("audits", "-p", "no:cacheprovider", "--model", str(model_dir),
                                           "--cache-dir", str(cache_dir), "-k", keyword)
    return rows_by_id(last_run(pytester.path / "reports")), result.stdout.str()


def save_lora(model, folder, seed=0, **config):
    """A LoRA adapter with random (non-zero) A and B, so it changes the model's outputs."""
    import torch
    from peft import LoraConfig, get_peft_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        lora = LoraConfig(r=4, lora_alpha=8, target_modules=config.pop("target_modules", "all-linear"),
                          init_lora_weights=False, task_type="CAUSAL_LM", **config)
        peft_model = get_peft_model(model, lora)
        peft_model.save_pretrained(folder, safe_serialization=True)
        peft_model.unload()
    return folder
