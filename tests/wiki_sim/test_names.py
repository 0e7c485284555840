"""Other names of a page: the title without its disambiguator, the defining sentence, bold lead names, redirects."""

from __future__ import annotations

import pytest

from wiki_sim import WikiSim
from wiki_sim.ingest.aliases import bold_names, lead_aliases, page_aliases, title_names


@pytest.mark.parametrize("title, lead, expected", [
    ("Rocky Mountains", "The Rocky Mountains, also known as the Rockies, are a major mountain range.", ["Rockies"]),
    ("Selim I", "Selim I, also known as Selim the Grim or Selim the Resolute, was the sultan.",
     ["Selim the Grim", "Selim the Resolute"]),
    ("Albania", "Albania (Albanian: Shqipëri; pronounced /x/), officially the Republic of Albania, is a country.",
     ["Shqipëri", "Republic of Albania"]),
    ("World Trade Organization", "The World Trade Organization (WTO) is an intergovernmental organization.", ["WTO"]),
    ("Gasoline", "Gasoline or petrol is a petrochemical product.", ["petrol"]),
    ("Alligator", "An alligator, or colloquially gator, is a large reptile.", ["gator"]),
    # Not names: dates in the parenthesis, an "or" that is not right after the subject, a list of things.
    ("Abraham Lincoln", "Abraham Lincoln (February 12, 1809 – April 15, 1865) was a president.", []),
    ("War", "War is an armed conflict between states, or between governmental forces and armed groups.", []),
    ("Mask", "A mask is an object worn on the face, for protection, disguise, or entertainment.", []),
])
def test_lead_aliases(title, lead, expected):
    assert [n for n, _ in lead_aliases(title, lead)] == expected


def test_title_and_bold_names():
    assert title_names("Berlin (band)") == [("Berlin", "title")] and title_names("Berlin") == []
    wikitext = ("{{Infobox country\n| name = '''not this'''\n}}\n'''Albania''' ({{lang-sq|'''Shqipëri'''}}), "
                "officially the '''Republic of [[Albania]]''', is a country.\n== History ==\n'''Later'''")
    assert bold_names("Albania", wikitext) == [("Shqipëri", "bold"), ("Republic of Albania", "bold")]
    assert bold_names("X", "no bold here\n== H ==\n'''After'''") == []
    assert page_aliases("Dune (novel)", "Dune is a 1965 novel.") == [("Dune", "title")]


def test_hostile_leads_are_bounded():
    lead = "X, also known as " + "a, " * 200_000 + "is here."
    names = lead_aliases("X", lead)
    assert len(names) < 100
    assert len(bold_names("X", "'''" * 100_000 + " Name ''' more")) <= 8


def test_names_through_wikisim(gensim_wiki):
    with WikiSim(gensim_wiki) as sim:
        assert ("ANOVA", "bold") in sim.names("Analysis of variance")
        assert "Oscars" in sim.aliases("Academy Awards")
        aliases = sim.aliases("Ayn Rand")
        assert "AynRand" in aliases  # a redirect
        assert "Alisa Zinov'yevna Rosenbaum" in aliases  # the lead's bold birth name
        assert aliases.index("Alisa Zinov'yevna Rosenbaum") < aliases.index("AynRand")
        assert "Ayn Rand" not in aliases and sim.aliases("No such page") == []
        assert sim.build_info["counts"]["names"] > 50
