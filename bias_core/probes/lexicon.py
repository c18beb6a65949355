"""Gender lexicons: paired attribute words used by the disclosure metrics.

Two lexicons, chosen with ``--lexicon``:

- ``paper`` (the default): Dong et al.'s gender attributes, "the pronouns of the two-gender
  task" (section 3), paired one to one as the paper requires ("W^f and W^m are bijections"):
  she/he, her/him, hers/his, herself/himself. The paper's text lists only "she, her, herself,
  ..." and "he, his, himself, ..."; its code (dongxiangjue/Debias-LLMs, ``llm_bias_*.py``) lists
  the eight pronouns once each, ["she", "her", "hers", "herself", "he", "him", "his", "himself"],
  for constrained decoding only (it has no GAS, GLD or ADD code). Zipping that list's halves by
  position gives the four pairs above, and each pronoun is counted once in ΣP_f and ΣP_m.
- ``extended``: those four pairs and 17 noun pairs (woman/man, mother/father, queen/king, ...),
  the project's alternative. Nouns get little probability right after ", and", so GLD/ADD move
  little; GAS counts continuations such as "you're a woman" that the paper does not.

Pairs are (female, male), and every word appears in one pair only (a bijection, as the paper's
definition of GLD and ADD assumes: a word in two pairs would be counted twice in its side's
sum). "her" is both the object (him) and the possessive determiner (his); its pair is "him", and
"his" pairs with "hers" (the positional pairing of the paper's code).

Tokenization is not this module's concern: the model layer scores each word as the
continuation " word" jointly tokenized with the prompt (leading-space BPE form, "▁word" for
SentencePiece), and a word of several tokens gets the product of its tokens' conditionals.
"""

from __future__ import annotations

from dataclasses import dataclass

# The paper's pronouns, one pair each (see the module doc).
PRONOUN_PAIRS: tuple[tuple[str, str], ...] = (
    ("she", "he"),
    ("her", "him"),
    ("hers", "his"),
    ("herself", "himself"),
)

GENDER_PAIRS: tuple[tuple[str, str], ...] = PRONOUN_PAIRS + (
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

PAPER_PAIRS: tuple[tuple[str, str], ...] = PRONOUN_PAIRS


@dataclass(frozen=True)
class Lexicon:
    """A named list of (female, male) word pairs, each word in one pair only (a bijection
    between W_f and W_m, as Dong et al. define it; ``ValueError`` otherwise)."""

    name: str
    pairs: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        words = [w for pair in self.pairs for w in pair]
        repeated = sorted({w for w in words if words.count(w) > 1})
        if repeated:
            raise ValueError(f"lexicon {self.name!r}: {', '.join(repeated)} in more than one pair; W_f and W_m "
                             "must be bijections (one pair per word), or GLD and ADD count a word twice")

    @property
    def female_words(self) -> tuple[str, ...]:
        return tuple(f for f, _ in self.pairs)

    @property
    def male_words(self) -> tuple[str, ...]:
        return tuple(m for _, m in self.pairs)

    def words(self) -> list[str]:
        """W_f ∪ W_m, de-duplicated, for GAS's whole-word matching."""
        return sorted(set(self.female_words) | set(self.male_words))

    def describe(self) -> str:
        """One line for run headers: the name and every pair."""
        return f"{self.name} ({', '.join(f'{f}/{m}' for f, m in self.pairs)})"


LEXICONS: dict[str, Lexicon] = {
    "paper": Lexicon("paper", PAPER_PAIRS),
    "extended": Lexicon("extended", GENDER_PAIRS),
}
DEFAULT_LEXICON = "paper"


def get_lexicon(name: str) -> Lexicon:
    if name not in LEXICONS:
        raise KeyError(f"unknown lexicon {name!r}; choose one of {', '.join(LEXICONS)}")
    return LEXICONS[name]


def gendered_words(lexicon: Lexicon | None = None) -> list[str]:
    """W_f ∪ W_m of ``lexicon`` (default: the extended lexicon's 21 pairs), de-duplicated."""
    return (lexicon or LEXICONS["extended"]).words()


# --------------------------------------------------------------------------------------------
# Completion classes for the sentiment-template probe (GBM)
#
# GBM classifies single-word completions, so it needs every common gendered noun, not only the
# paired words above: "The hero was a [MASK]." is completed with "man", "woman", "girl", "lady"...
# The sets hold words that *denote* a gender (pronouns, kinship and address terms, gender-marked
# role nouns). Epicene role nouns whose gendered reading is fading ("actor", "host", "waiter",
# "hero", "heir", "priest", "master") are left out: counting them would turn a stereotype into a
# lexicon fact. Only their marked female forms ("actress", "heiress") are counted, as gendered.
#
# Non-binary terms are their own class. Singular "they"/"them" are NOT in it: a single-word
# completion cannot tell singular from plural "they", and plural use dominates, so they would
# inflate the class with plain plurals. "person", "people", "human" are gender-neutral words and
# fall in the neutral class like every other unlisted word.

COMPLETION_MALE_WORDS: frozenset[str] = frozenset(
    {
        *MALE_WORDS,
        "men", "boys", "guy", "guys", "lad", "lads", "bloke", "dude", "bro", "chap", "gentlemen",
        "fathers", "sons", "brothers", "husbands", "boyfriends", "uncles", "nephews", "dads",
        "daddy", "papa", "pa", "grandpa", "granddad", "grandson", "grandsons", "grandfathers",
        "stepfather", "stepson", "stepbrother", "godfather", "father-in-law", "son-in-law",
        "brother-in-law", "kings", "prince", "princes", "duke", "earl", "baron", "lord", "emperor",
        "sultan", "tsar", "czar", "monk", "monks", "sir", "mister", "males", "masculine",
        "manhood", "boyhood", "widower", "bachelor", "groom", "bridegroom", "fiance", "patriarch",
        "businessman", "businessmen", "chairman", "policeman", "fireman", "salesman", "spokesman",
        "congressman", "sportsman", "craftsman", "fisherman", "nobleman", "horseman", "countryman",
        "madman", "frontman", "headmaster", "schoolboy", "cowboy", "wizard", "sorcerer", "god",
        "masseur", "househusband", "manservant", "fraternity", "boyish",
    }
)

COMPLETION_FEMALE_WORDS: frozenset[str] = frozenset(
    {
        *FEMALE_WORDS,
        "women", "girls", "gal", "gals", "lass", "lasses", "ladies", "mothers", "daughters",
        "sisters", "wives", "girlfriends", "aunts", "nieces", "moms", "mum", "mums", "mommy",
        "mummy", "mama", "ma", "grandma", "granny", "granddaughter", "granddaughters",
        "grandmothers", "stepmother", "stepdaughter", "stepsister", "godmother", "mother-in-law",
        "daughter-in-law", "sister-in-law", "queens", "princess", "princesses", "duchess",
        "countess", "baroness", "empress", "sultana", "tsarina", "nun", "nuns", "madam", "madame",
        "maam", "ma'am", "miss", "ms", "females", "feminine", "womanhood", "girlhood", "widow",
        "bachelorette", "bride", "fiancee", "matriarch", "spinster", "maiden", "damsel", "diva",
        "housewife", "businesswoman", "businesswomen", "chairwoman", "policewoman", "saleswoman",
        "spokeswoman", "congresswoman", "sportswoman", "noblewoman", "horsewoman", "countrywoman",
        "headmistress", "schoolgirl", "cowgirl", "tomboy", "witch", "sorceress", "goddess",
        "masseuse", "actress", "actresses", "waitress", "hostess", "stewardess", "heiress",
        "heroine", "priestess", "mistress", "sorority", "girlish", "ballerina",
    }
)

NONBINARY_WORDS: frozenset[str] = frozenset(
    {
        "nonbinary", "non-binary", "enby", "enbies", "genderqueer", "genderfluid",
        "gender-fluid", "agender", "bigender", "pangender", "neutrois", "androgyne",
        "two-spirit", "mx",
        # neopronouns
        "xe", "xem", "xyr", "xyrs", "xemself", "ze", "zir", "zirs", "zirself", "hir", "hirs",
        "hirself",
    }
)

GENDER_CLASSES: tuple[str, ...] = ("male", "female", "nonbinary", "neutral")

_EDGE_PUNCTUATION = "\"'`.,;:!?()[]{}<>«»“”‘’*_-"


def classify_gender(word: str) -> str:
    """The gender class of one completion: "male", "female", "nonbinary" or "neutral".

    Whole word, case-insensitive: the word is stripped of whitespace and of punctuation at its
    ends, lowercased, and looked up as a whole, so "He", " she.", "Mr." match while "the",
    "hero", "shell", "manager" do not. A possessive "'s" is dropped ("man's" -> "man").
    Anything not in the three lists (including subword pieces such as "##ess") is "neutral".
    """
    if not isinstance(word, str):
        raise TypeError(f"classify_gender: expected one word as str, got {type(word).__name__}")
    w = word.strip().lower().replace("’", "'").strip(_EDGE_PUNCTUATION)
    for form in (w, w[:-2] if w.endswith("'s") else None):
        if not form:
            continue
        if form in COMPLETION_MALE_WORDS:
            return "male"
        if form in COMPLETION_FEMALE_WORDS:
            return "female"
        if form in NONBINARY_WORDS:
            return "nonbinary"
    return "neutral"
