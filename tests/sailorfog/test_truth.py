"""Research tasks state true things: types from the head of the defining phrase, relations only where
the sentence asserts them of the linked entity, and a plain-reading check that finds second answers."""

from __future__ import annotations

import pytest

from sailorfog.describe import defining_type


@pytest.mark.parametrize("sentence, expected", [
    # the head of the first predicate nominal, not a later phrase or a noun inside a modifier
    ("John Snow was an English physician and a leader in the development of anaesthesia.", ["English", "physician"]),
    ("Bass Strait is a strait separating the island state of Tasmania from the Australian mainland.", ["strait"]),
    ("José de San Martín was an Argentine general and the primary leader of the independence.",
     ["Argentine", "general"]),
    ("Malay is an Austronesian language native to several islands of Maritime Southeast Asia.",
     ["Austronesian", "language"]),
    ("Caravaggio was an Italian painter active in Rome.", ["Italian", "painter"]),
    # vague heads, superlatives and heads that need their "of" complement are no type
    ("A farm is an area of land that is devoted primarily to agricultural processes.", []),
    ("A dairy farm is a place where milk is stored and where butter is made.", []),
    ("A hobby is a regular activity that is done for enjoyment.", []),
    ("Gnosticism is a collection of different religious and philosophical ideas.", []),
    ("In economics, economic growth is an increase in the quantity and quality of goods.", []),
    ("Gas is a state of matter with neither fixed volume nor fixed shape.", []),
    ("A concept is a fundamental unit of cognition that classifies entities.", []),
    ("The Pacific Ocean is the largest and deepest of Earth's five oceanic divisions.", []),
    ("A statute is a law or formal written enactment of a legislature.", ["law"]),
    ("A wig is a head covering made from human or animal hair.", []),
    # what stays right
    ("Penang is a Malaysian state located on the northwest coast of Peninsular Malaysia.", ["Malaysian", "state"]),
    ("Mikhail Gorbachev was a Soviet and Russian politician who led.", ["Russian", "politician"]),
    ("A French fishing village is a French fishing village on a coast.", ["French", "fishing", "village"]),
    ("Sesame Street is an American educational children's television series that combines puppetry.",
     ["children's", "television", "series"]),
])
def test_type_is_the_head_of_the_first_predicate_nominal(sentence, expected):
    assert defining_type(sentence) == expected
