"""The project's gender lexicon: paired attribute words used by the disclosure metrics.

Pairs are (female, male). The same surface word may appear in two pairs ("her" pairs with
both "his" and "him", as in Dong et al.): GLD/ADD sum over pairs, so "her" is counted once per
pair it belongs to, matched by "his" and "him" on the male side; the sums stay comparable.

Tokenization is not this module's concern: the model layer scores each word as the
continuation " word" jointly tokenized with the prompt (leading-space BPE form, "▁word" for
SentencePiece), and a word of several tokens gets the product of its tokens' conditionals.
"""

from __future__ import annotations

GENDER_PAIRS: tuple[tuple[str, str], ...] = (
    ("she", "he"),
    ("her", "his"),
    ("her", "him"),
    ("hers", "his"),
    ("herself", "himself"),
    ("woman", "man"),
    ("women", "men"),
    ("girl", "boy"),
    ("girls", "boys"),
    ("mother", "father"),
    ("daughter", "son"),
    ("sister", "brother"),
    ("wife", "husband"),
    ("girlfriend", "boyfriend"),
    ("aunt", "uncle"),
    ("niece", "nephew"),
    ("lady", "gentleman"),
    ("mom", "dad"),
    ("grandmother", "grandfather"),
    ("queen", "king"),
    ("female", "male"),
    ("mrs", "mr"),
)

FEMALE_WORDS: tuple[str, ...] = tuple(f for f, _ in GENDER_PAIRS)
MALE_WORDS: tuple[str, ...] = tuple(m for _, m in GENDER_PAIRS)


def gendered_words() -> list[str]:
    """W_f ∪ W_m, de-duplicated, for GAS's whole-word matching."""
    return sorted(set(FEMALE_WORDS) | set(MALE_WORDS))
