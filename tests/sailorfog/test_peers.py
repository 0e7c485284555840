"""Second answers without a page: the answer's peers listed beside it in a neighbour's text."""

from __future__ import annotations

import pytest

from sailorfog.corpus_index import open_corpus_index
from sailorfog.peers import fits_name_checks, headed, located, peers, typed, unpaged_peers
from sailorfog.research import ResearchSynthesizer
from sailorfog.statements import Statement
from wiki_sim import WikiSim


@pytest.mark.parametrize("text, name, cast, expected", [
    ("Other important cities in the kingdom were Timbuktu and Djenné, where trade flourished.", "Timbuktu", False,
     {"Djenné"}),
    ("It is the country's third-most populous city after Buenos Aires and Córdoba.", "Buenos Aires", False,
     {"Córdoba"}),
    ("He influenced poets, including Robert Browning, Algernon Charles Swinburne, Thomas Hardy and W. B. Yeats.",
     "W. B. Yeats", False, {"Robert Browning", "Algernon Charles Swinburne", "Thomas Hardy"}),
    ("Eastern Arabia is a historical region stretching from Basra to Khasab along the coast.", "Basra", False,
     {"Khasab"}),
    # a name that is not in the list with the answer is no peer
    ("Paris is the capital of France. Lyon lies on the Rhône.", "Paris", False, set()),
    ("Bohr visited Copenhagen and met Rutherford in Manchester.", "Rutherford", False, set()),
    # a demonym or a pronoun beside the answer is no name
    ("The song was written with music by Jobim and Portuguese lyrics.", "Jobim", False, set()),
    # a cast: every name of the cast sentences near the answer
    ("Lawrence of Arabia introduces Peter O'Toole as Lawrence, with Alec Guinness playing Prince Faisal. It also "
     "stars Jack Hawkins, Anthony Quinn and Omar Sharif. The film was shot in Jordan.", "Peter O'Toole", True,
     {"Jack Hawkins", "Anthony Quinn", "Omar Sharif"}),
    ("Lawrence of Arabia introduces Peter O'Toole as Lawrence. It also stars Jack Hawkins.", "Peter O'Toole", False,
     set()),
])
def test_peers_are_the_names_listed_with_the_answer(text, name, cast, expected):
    assert peers(text, name, cast) == expected


def test_a_name_given_the_answers_type_in_apposition_is_a_peer():
    """Montreal "lies 196 kilometres east of the national capital, Ottawa, and 258 kilometres southwest of the
    provincial capital, Quebec City" (blind play, seeds 9191 and 9898: Quebec City has no page)."""
    text = ("It lies 196 kilometres east of the national capital, Ottawa, and 258 kilometres southwest of the "
            "provincial capital, Quebec City. Its port, the city's, is busy.")
    assert peers(text, "Ottawa", kind="capital city") == {"Quebec City"}
    assert peers(text, "Ottawa") == set()
    assert typed(text, "capital city") == {"Ottawa", "Quebec City"}
    assert typed("It trades with the capital, Ottawa's port.", "capital") == {"Ottawa"}


def test_a_name_written_with_the_answers_type_after_it_is_a_peer():
    """Blind play (seed 11111): "This region has ties to a river" was the Amur, but Manchuria's first sentence names
    "the Uda River" too, which has no page."""
    text = ("Manchuria is a historical region encompassing parts of the modern-day Russian Far East south of the Uda "
            "River and the Tukuringra-Dzhagdy ranges. The Amur River forms its border. It was ruled by the Jin "
            "dynasty and Mexico City's rivals, and Malay language speakers came.")
    assert peers(text, "Amur", kind="river") == {"Uda River"}
    assert headed(text, "imperial dynasty") == {"Jin dynasty"}
    assert headed(text, "language") == {"Malay language"}
    assert headed(text, "city") == {"Mexico City"}  # capitalized, part of the name
    assert headed("The Disney film was shown. The Ganges river fed the Film.", "film") == set()
    assert headed(text, "") == set() and peers(text, "Amur", kind="sea") == set()


def test_a_name_given_a_persons_role_in_apposition_is_a_peer_of_a_person():
    """Blind play (seed 10808): "This campaign is associated with a person. Who is this person?" was Augusto Pinochet,
    but Operation Condor's page names his spy chief too, who has no page."""
    text = ("In 1975, Chilean dictator Augusto Pinochet's spy chief, Manuel Contreras, invited 50 intelligence officers "
            "to Santiago. The operation, the first of its kind, grew.")
    assert peers(text, "Augusto Pinochet", kind="person") == {"Manuel Contreras"}
    assert peers(text, "Augusto Pinochet", kind="dictator") == set()


def test_a_settlement_written_with_a_place_after_a_comma_is_a_peer_of_a_city():
    """Alejo Carpentier was "Born in Lausanne, Switzerland ... grew up in Havana, Cuba": "a city" tied to the
    novelist is Lausanne as much as Havana (blind play, seed 9999: Lausanne has no page)."""
    text = ("Born in Lausanne, Switzerland, of French and Russian parentage, Carpentier grew up in Havana, Cuba. "
            "He wrote for Gilgit and Tibet, and for Smith, Jones.")
    places = {"Switzerland", "Cuba", "Tibet"}.__contains__
    assert located(text, places) == {"Lausanne", "Havana"}
    assert located("It includes 4 Zhangzhou districts and connects with Quanzhou in the north.", places) == {"Zhangzhou"}
    assert peers(text, "Havana", kind="city", is_place=places) == {"Lausanne", "Cuba"}  # Cuba: left to its page
    assert peers(text, "Havana", kind="novel", is_place=places) == {"Cuba"}  # not a settlement


def test_two_names_joined_by_and_are_one_where_that_names_a_page():
    text = "Portuguese is spoken in Timor-Leste, São Tomé and Príncipe, and Mozambique."
    assert peers(text, "Timor-Leste") == {"São Tomé", "Príncipe", "Mozambique"}
    assert peers(text, "Timor-Leste", is_page=lambda n: n == "São Tomé and Príncipe") == {"São Tomé and Príncipe",
                                                                                          "Mozambique"}


def test_an_opening_word_of_a_title_names_that_page(default_wiki):
    """"Archimedes and Apollonius": a reader takes Apollonius for Apollonius of Perga, a page."""
    sim = WikiSim(default_wiki)
    try:
        synth = ResearchSynthesizer(open_corpus_index(sim), sim, seed=0)
        assert synth.names_a_page("Apollonius") and synth.names_a_page("Apollonius of Perga")
        assert not synth.names_a_page("Jack Hawkins") and not synth.names_a_page("Zzyzx")
    finally:
        sim.close()


def test_name_clues_rule_peers_out_as_they_rule_pages_out():
    two_words = [{"type": "name_words", "node": "X", "n": 2}]
    assert fits_name_checks("Jack Hawkins", two_words) and not fits_name_checks("Algernon Charles Swinburne", two_words)
    assert not fits_name_checks("Omar Sharif", [{"type": "prefix", "node": "X", "prefix": "J"}])
    assert fits_name_checks("Omar Sharif", [{"type": "year", "node": "X", "lo": 1900, "hi": 1999}])  # not of a name


@pytest.mark.timeout(120)  # linear: well under a second each; quadratic would take hours
def test_peers_stay_linear_on_a_hostile_text():
    assert peers("Bob and Cee. " + "Ab, " * 200_000, "Bob", cast=True) == {"Cee"}
    assert peers("A, " * 200_000 + "B and C.", "B", cast=True) == set()  # past the 20,000 characters read
    assert peers("Aa Bb " * 100_000, "Bb", cast=True, kind="capital city") == set()
    assert peers("capitals, " * 100_000, "Bb", kind="capital city") == set()
    assert peers("Aa river " * 100_000, "Bb", kind="river") == {"Aa river"}
    assert peers("Aa, " * 100_000 + "Bb", "Bb", kind="city", is_place=lambda n: True) == {"Aa"}


def test_the_cast_of_a_film_answers_an_actor_question_on_the_default_corpus(default_wiki):
    """"A drama film ... has ties to an actor whose name has two words": Peter O'Toole has a page, the rest
    of the cast named in the film's lead does not (blind play, seed 9797)."""
    sim = WikiSim(default_wiki)
    try:
        index = open_corpus_index(sim)
        statements = [
            Statement("Xt", "type", "X", value="actor", checks=[{"type": "type", "node": "X", "words": ["actor"]}]),
            Statement("Xw", "name_words", "X", value="two", checks=[{"type": "name_words", "node": "X", "n": 2}]),
            Statement("Bp", "name", "B", value="Lawrence of Arabia (film)",
                      checks=[{"type": "title", "node": "B", "title": "Lawrence of Arabia (film)"}]),
            Statement("rBX", "relation", "B", predicate="mentions", object="X",
                      checks=[{"type": "link", "a": "B", "b": "X"}]),
        ]
        titles = {"X": "Peter O'Toole", "B": "Lawrence of Arabia (film)"}
        text_of = lambda title: (sim.page(title) or {}).get("text", "")  # noqa: E731
        found = unpaged_peers(statements, "Peter O'Toole", text_of, titles,
                              is_page=lambda n: sim.resolve(n) is not None)
        assert {"Jack Hawkins", "Anthony Quinn"} <= set(found)
        synth = ResearchSynthesizer(index, sim, seed=0)
        assert "Jack Hawkins" in synth.second_answers(statements, "Peter O'Toole", titles)
        assert "Jack Hawkins" not in synth.second_answers(statements, "Peter O'Toole")  # pages only
    finally:
        sim.close()
