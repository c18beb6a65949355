"""CDS gender swapping against hand-written sentences, and the swapped share of a corpus."""

from __future__ import annotations

import pytest

from bias_core.errors import AuditUsageError
from bias_core.mitigation.methods.corpus_tuning import cds_sentences
from bias_core.mitigation.methods.swap import GenderSwapper, default_pairs, match_case


@pytest.fixture(scope="module")
def swapper():
    return GenderSwapper()


@pytest.mark.parametrize("text, expected", [
    # case follows the original word
    ("he said", "she said"),
    ("He said", "She said"),
    ("HE SAID", "SHE SAID"),
    ("The King and the Queen", "The Queen and the King"),
    # possessives: "'s" stays, "her" before a noun is a determiner, "his" alone is a pronoun
    ("The man's hat.", "The woman's hat."),
    ("Her book is on his desk.", "His book is on her desk."),
    ("The choice was his.", "The choice was hers."),
    ("It is hers, not his.", "It is his, not hers."),
    ("his and hers", "hers and his"),
    ("her own first album", "his own first album"),
    # object "her" / "him"
    ("He gave her the book.", "She gave him the book."),
    ("She told him that he was late.", "He told her that she was late."),
    ("They saw her yesterday.", "They saw him yesterday."),
    ("I met her.", "I met him."),
    # titles keep their full stop
    ("Mr. Smith met Mrs. Jones.", "Mrs. Smith met Mr. Jones."),
    ("Ms. Lee", "Mr. Lee"),
    # compounds and plurals
    ("his son-in-law and the waitresses", "her daughter-in-law and the waiters"),
    ("Boys and girls", "Girls and boys"),
    # first names, capitalised only, possessive kept
    ("Mary's brother", "James's sister"),
    ("John met Mary.", "Jennifer met James."),  # paired by rank: John-Jennifer, James-Mary
    # ambiguous names swap only before a capitalised word (a surname)
    ("Grace Kelly and Mark Twain", "Elijah Kelly and Ashley Twain"),
])
def test_swap_hand_written(swapper, text, expected):
    assert swapper.swap(text)[0] == expected


@pytest.mark.parametrize("text", [
    "the theme of the shepherd",  # "he" inside words
    "Richmond, Virginia is a city.",  # a place that is also a name, no surname after it
    "Grace is a virtue.",
    "You will mark the date and frank the letter.",  # lower-case name words
    "The cat sat on the mat.",
    "My friend bakes bread every morning.",
])
def test_words_that_must_not_swap(swapper, text):
    assert swapper.swap(text) == (text, 0)


def test_swap_counts_words(swapper):
    assert swapper.swap("He gave her his book.") == ("She gave him her book.", 3)


def test_swap_back_restores_unambiguous_text(swapper):
    for text in ("The man and the woman met his sister.", "Mary said she liked her job.", "Mr. Brown is an actor."):
        once, _ = swapper.swap(text)
        assert swapper.swap(once)[0] == text


def test_swap_pair_changes_only_that_pair(swapper):
    assert swapper.swap_pair("She said he was her friend.", ("he", "she")) == "He said she was her friend."
    assert swapper.swap_pair("He gave his book.", ("his", "her")) == "He gave her book."
    assert swapper.swap_pair("The cat sat.", ("he", "she")) is None


def test_match_case():
    assert [match_case("she", w) for w in ("he", "He", "HE")] == ["she", "She", "SHE"]


def test_pairs_have_a_stated_source():
    pairs = default_pairs()
    assert "GENDER_PAIRS" in pairs.source and "cds_swap_pairs.json" in pairs.source
    assert ("he", "she") in pairs.words and ("james", "mary") in pairs.names
    # the pronouns the rules handle are not left to the word table
    assert not {w for p in pairs.words for w in p} & {"his", "her", "him", "hers"}
    males = {m for m, _ in pairs.names}
    assert not males & {f for _, f in pairs.names}, "a name listed for both genders cannot be swapped"


def test_cds_swaps_a_seeded_share(swapper):
    corpus = [f"He is number {i}." for i in range(40)]
    out = cds_sentences(corpus, 0.6, seed=3, swapper=swapper)
    assert sum(s.startswith("She") for s in out) == 24
    assert out == cds_sentences(corpus, 0.6, seed=3, swapper=swapper)
    assert out != cds_sentences(corpus, 0.6, seed=4, swapper=swapper)
    assert cds_sentences(corpus, 0.0, 0, swapper) == corpus
    assert all(s.startswith("She") for s in cds_sentences(corpus, 1.0, 0, swapper))
    with pytest.raises(AuditUsageError, match="swap rate"):
        cds_sentences(corpus, 1.5, 0, swapper)


@pytest.mark.parametrize("rate", [0.6, 0.95])
def test_cds_training_batches_see_the_swap_rate(swapper, rate):
    """The sentences the quick CPU schedule trains on (60 steps of 8) are swapped at about the
    rate asked for. The subset once came from the schedule's own random stream: the first pass
    trained on its prefix, all swapped, and swap rates 0.6 and 0.95 gave bit-identical adapters."""
    from bias_core.mitigation.training.lora import batch_schedule

    corpus = [f"He is number {i}." for i in range(3000)]
    out = cds_sentences(corpus, rate, seed=0, swapper=swapper)
    trained = [i for batch in batch_schedule(len(corpus), 8, 60, seed=0) for i in batch]
    share = sum(out[i].startswith("She") for i in trained) / len(trained)
    # 480 draws without replacement: binomial sd <= 0.023; 5 sd either side
    assert abs(share - rate) < 0.115, share
