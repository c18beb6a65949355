"""A tiny randomly initialised Llama causal LM with a locally trained byte-level BPE tokenizer.

Built entirely offline (no hub): the tokenizer is trained with the ``tokenizers`` library on a
small in-code corpus, the model is ``LlamaForCausalLM`` from a config. Both are saved with
``save_pretrained`` into one folder, so the folder loads like any Hugging Face model directory
(``--model ./that/folder``). The same seed gives byte-identical files.
"""

from __future__ import annotations

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


def build_tiny_causal_lm(path: str | Path, seed: int = 0) -> Path:
    """Write a tiny random LlamaForCausalLM and its tokenizer to ``path``; return the folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
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
