"""Gender swapping of running text, for counterfactual data substitution (CDS), embedding
regularization (ER) and SentenceDebias's paired sentences.

Source of the pairs: the project's lexicon (``bias_core.probes.lexicon.GENDER_PAIRS``) extended with
``bias_core/data/cds_swap_pairs.json`` (see ``cds_swap_pairs.md``): more gendered word pairs,
written for the project, and 94 first-name pairs, the most common US given names of each
gender (the Social Security Administration's public-domain name counts) paired by rank, the
way Hall Maudslay et al. (2019, "It's All in the Name") pair names by frequency. The paper's
code (mulinShi/DA-Gender, from rowanhm/counterfactual-data-substitution) uses Lu et al.'s 124
word pairs and 1,000 name pairs; those files carry no licence, so they are not shipped.

Where the paper's substitutor asks spaCy (a POS tag for "her", a PERSON entity for names),
this module uses rules that need no model, stated here and tested in tests/test_swap.py:

- Whole words only, matched case-insensitively with letters and inner hyphens
  ("son-in-law"): "he" inside "the" or "shepherd" never swaps. A possessive "'s" stays ("John's"
  -> "Mary's"), and "Mr." keeps its full stop ("Mr." -> "Mrs.", "Ms." -> "Mr.").
- Case follows the original word: "he" -> "she", "He" -> "She", "HE" -> "SHE".
- "him" -> "her"; "hers" -> "his"; "his" -> "hers" when it stands alone (before punctuation,
  the end, or "and"/"or"/"is"/"was"...), else "her"; "her" -> "him" when an object (before
  punctuation, the end, or a closed-class word: a preposition, conjunction, determiner,
  pronoun or adverb such as "to", "and", "the", "yesterday"), else "his" (a determiner before
  a noun or adjective: "her book", "her own", "her first album").
- First names swap only when capitalised ("Mary" -> "James", never "mark" the verb). Names
  that are also ordinary words or places ("Mark", "Grace", "Virginia", "Jack") swap only when
  a capitalised word follows, as a surname does ("Grace Kelly", but not "Richmond, Virginia"
  or "Grace is a virtue").
- A word listed in two pairs (e.g. "bride" with "groom" and "bridegroom") maps back to its
  first pair.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache

PAIRS_FILE = "cds_swap_pairs.json"

# Words after which an object "her" is the likelier reading (closed classes and a few adverbs).
_OBJECT_FOLLOWERS = frozenset(
    """about above across after against along among around as at before behind below beside between
    beyond by despite down during except for from in inside into like near of off on onto out outside
    over past since through throughout till to toward towards under until up upon with within without
    and or but nor so yet because although though while whereas if unless that than when where whether
    a an the this these those some any no every each all both either neither another such what which
    whose my your his her its our their i me you he him she it we us they them who whom himself herself
    itself themselves something anything nothing everything someone anyone everyone somebody
    again away back here there now then today tomorrow yesterday tonight once twice too also always never
    often still just even later soon already alone home together forward aside apart
    is was were are be been being has had have do does did will would can could shall should may might
    must not""".split()
)
# Words after which "his" stands alone ("his and hers", "the choice was his").
_STANDALONE_FOLLOWERS = frozenset("and or but nor is was were are too not alone".split())
_WORD = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")
_NEXT = re.compile(r"\s*([A-Za-z]+(?:-[A-Za-z]+)*|\S)?")
_SPECIAL = ("him", "his", "her", "hers")


@dataclass(frozen=True)
class SwapPairs:
    """(male, female) word pairs and first-name pairs, with where they came from."""

    words: tuple[tuple[str, str], ...]
    names: tuple[tuple[str, str], ...]
    ambiguous_names: frozenset[str] = field(default_factory=frozenset)
    source: str = ""

    def all_pairs(self) -> list[tuple[str, str]]:
        """Word pairs, then name pairs, then the pronoun pairs the rules handle (his/her,
        him/her): SentenceDebias takes a leading share of this list, as the paper takes a
        leading share of its pair file."""
        return [*self.words, *self.names, ("his", "her"), ("him", "her")]


@lru_cache(maxsize=1)
def default_pairs() -> SwapPairs:
    from bias_core.probes.lexicon import GENDER_PAIRS
    from bias_core.probes.sources import project_data

    path = project_data(PAIRS_FILE)
    data = json.loads(path.read_text(encoding="utf-8"))
    lexicon = [(m, f) for f, m in GENDER_PAIRS if m not in _SPECIAL and f not in _SPECIAL]
    words = list(dict.fromkeys([*lexicon, *(tuple(p) for p in data["word_pairs"])]))
    return SwapPairs(
        words=tuple(words),
        names=tuple(tuple(p) for p in data["name_pairs"]),
        ambiguous_names=frozenset(data["ambiguous_names"]),
        source=f"bias_core.probes.lexicon.GENDER_PAIRS + {path.name} ({len(words)} word pairs, "
               f"{len(data['name_pairs'])} first-name pairs)",
    )


def _two_way(pairs) -> dict[str, str]:
    out: dict[str, str] = {}
    for a, b in pairs:
        out.setdefault(a.lower(), b.lower())
        out.setdefault(b.lower(), a.lower())
    return out


def words_of(text: str) -> frozenset[str]:
    """The lower-cased whole words of a text, as the swapper matches them."""
    return frozenset(w.lower() for w in _WORD.findall(text))


def match_case(word: str, like: str) -> str:
    """``word`` in the case pattern of ``like``: lower, UPPER or Title (else as given)."""
    if like.islower():
        return word.lower()
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:].lower()
    return word


class GenderSwapper:
    """Swaps every gendered word of a text with its counterpart (rules in the module doc)."""

    def __init__(self, pairs: SwapPairs | None = None):
        self.pairs = pairs or default_pairs()
        self._words = _two_way(self.pairs.words)
        self._words.setdefault("ms", "mr")
        self._names = _two_way(self.pairs.names)
        self._ambiguous = frozenset(n.lower() for n in self.pairs.ambiguous_names)

    def _next_word(self, text: str, end: int) -> str | None:
        """The next word after ``end`` (None at punctuation or the end of the text)."""
        if text[end : end + 2] in ("'s", "’s"):
            return None
        m = _NEXT.match(text, end)
        nxt = m.group(1) if m else None
        return nxt if nxt and nxt[0].isalpha() else None

    def _special(self, low: str, nxt: str | None) -> str:
        if low == "him":
            return "her"
        if low == "hers":
            return "his"
        closed = nxt is None or nxt.lower() in _OBJECT_FOLLOWERS
        if low == "his":
            return "hers" if nxt is None or nxt.lower() in _STANDALONE_FOLLOWERS else "her"
        return "him" if closed else "his"  # "her"

    def swap_word(self, word: str, nxt: str | None) -> str | None:
        """The counterpart of ``word`` given the word after it, or None when it does not swap."""
        low = word.lower()
        if low in _SPECIAL:
            return match_case(self._special(low, nxt), word)
        if low in self._words:
            return match_case(self._words[low], word)
        if low in self._names and word[:1].isupper():
            if low in self._ambiguous and not (nxt and nxt[:1].isupper()):
                return None
            return match_case(self._names[low], word)
        return None

    def swap(self, text: str) -> tuple[str, int]:
        """(the text with every gendered word swapped, how many words were swapped)."""
        out, last, count = [], 0, 0
        for m in _WORD.finditer(text):
            flipped = self.swap_word(m.group(0), self._next_word(text, m.end()))
            if flipped is None:
                continue
            out.append(text[last : m.start()])
            out.append(flipped)
            last = m.end()
            count += 1
        out.append(text[last:])
        return "".join(out), count

    def swap_pair(self, text: str, pair: tuple[str, str]) -> str | None:
        """The text with only the words of ``pair`` swapped with each other (SentenceDebias's
        defining sentences change one pair at a time), or None when no word of it swaps."""
        words = {w.lower() for w in pair}
        out, last, count = [], 0, 0
        for m in _WORD.finditer(text):
            if m.group(0).lower() not in words:
                continue
            flipped = self.swap_word(m.group(0), self._next_word(text, m.end()))
            if flipped is None or flipped.lower() not in words:
                continue
            out += [text[last : m.start()], flipped]
            last = m.end()
            count += 1
        return "".join(out) + text[last:] if count else None
