"""wikitext -> Page: each rendering rule on the markup it is for (expected values written out by hand)."""

from __future__ import annotations

import pytest

from wiki_sim.ingest import values as V
from wiki_sim.ingest.wikitext import parse_page


def page(text: str):
    return parse_page("Test", text)


@pytest.mark.parametrize("markup, expected", [
    ("{{convert|12|km}}", "12 km"),
    ("{{convert|1|-|3|km|mi}}", "1–3 km"),
    ("{{convert|5|to|7|sqmi|km2}}", "5 to 7 sq mi"),
    ("{{cvt|100|C}}", "100 °C"),
    ("{{birth date|1879|3|14}}", "14 March 1879"),
    ("{{Birth date and age|df=yes|1950|12|1}}", "1 December 1950"),
    ("{{death date and age|1955|4|18|1879|3|14}}", "18 April 1955 (aged 76)"),
    ("{{death date and age|1955|2|1|1879|3|14}}", "1 February 1955 (aged 75)"),
    ("{{start date|1969|7}}", "July 1969"),
    ("{{dts|1066}}", "1066"),
    ("{{circa|1200}}", "c. 1200"),
    ("{{lang|fr|la vie en rose}}", "la vie en rose"),
    ("{{lang-de|Ich bin ein Berliner}}", "Ich bin ein Berliner"),
    ("{{nowrap|Princeton, New Jersey}}", "Princeton, New Jersey"),
    ("{{sortname|Ada|Lovelace}}", "Ada Lovelace"),
    ("{{marriage|Elsa Löwenthal|1919|1936}}", "Elsa Löwenthal (m. 1919–1936)"),
    ("{{frac|3|1|2}}", "3 1/2"),
    ("{{formatnum:1234567}}", "1,234,567"),
    ("{{val|1.5|e=8|u=km}}", "1.5×10^8 km"),
    ("{{coord|40|26|N|79|58|W|display=title}}", "40°26′N 79°58′W"),
    ("{{nihongo|Tokyo|東京|Tōkyō}}", "Tokyo (東京, Tōkyō)"),
    ("{{US$|250}}", "US$250"),
    ("a{{snd}}b", "a – b"),
    ("{{citation needed}}", ""),
    ("{{cite web|url=http://x|title=Junk}}", ""),
    ("{{IPAc-en|ˈ|aɪ|n}}", ""),
])
def test_inline_templates_render_their_content(markup, expected):
    assert page(markup).text == expected


def test_links_anchors_trail_and_pipe_trick():
    p = page("The [[physicist]]s met [[Albert Einstein|Einstein]] at [[Princeton, New Jersey|]] "
             "and [[Mercury (planet)|]] in [[OS&nbsp;X]].")
    assert p.text == "The physicists met Einstein at Princeton, New Jersey and Mercury in OS X."
    assert p.links == [("Physicist", "physicists"), ("Albert Einstein", "Einstein"),
                       ("Princeton, New Jersey", "Princeton, New Jersey"), ("Mercury (planet)", "Mercury"),
                       ("OS X", "OS X")]


def test_files_categories_interlanguage_and_namespaces():
    p = page("Intro.\n[[File:Einstein 1921.jpg|thumb|upright|Einstein in ''1921'' with [[Ulm]]]]\n"
             "Text with [[Wikipedia:Manual of Style|style]] and [[wikt:ambiguity|a word]].\n"
             "[[:Category:Physicists|physicists list]]\n[[Category:Physicists]]\n[[de:Albert Einstein]]")
    assert p.text == "Intro.\n\nText with style and a word.\nphysicists list"
    assert p.links == []


def test_refs_comments_and_stray_markup_are_dropped():
    p = page("Fact.<ref>{{cite book|title=Secret Source}}</ref> More<ref name=a/> text<!-- hidden -->. "
             "Open {{broken")
    assert "Secret Source" not in p.text and "hidden" not in p.text
    assert p.text.startswith("Fact. More text.")
    assert "{{" not in p.text


def test_headings_sections_lead_and_reference_sections():
    p = page("Lead text.\n== History ==\nOld times.\n=== Early ===\nEarlier.\n"
             "== References ==\n{{reflist}}\n* a book\n=== Sub of refs ===\nstill refs\n"
             "== External links ==\n* [http://example.org site]\n== Legacy ==\nLater.")
    assert p.lead == "Lead text."
    assert p.sections == ["History", "Early", "Legacy"]
    assert p.text == "Lead text.\n\n## History\n\nOld times.\n\n### Early\n\nEarlier.\n\n## Legacy\n\nLater."


def test_tables_and_lists_become_lines():
    p = page('{| class="wikitable"\n|+ Moons\n! Name !! Radius\n|-\n| Io || 1821 km\n|-\n'
             '| style="color:red" | Europa || 1560 km\n|}\n* first\n* second [[Ganymede]]')
    assert p.text == "Moons\nName | Radius\nIo | 1821 km\nEuropa | 1560 km\n\n- first\n- second Ganymede"
    assert ("Ganymede", "Ganymede") in p.links


def test_infobox_facts_short_description_and_hatnotes():
    p = page("{{Short description|German-born physicist}}{{Main|Theory of relativity}}\n"
             "{{Infobox scientist\n| name = Albert Einstein\n| image = Einstein.jpg\n"
             "| birth_date = {{Birth date|df=yes|1879|3|14}}\n| birth_place = [[Ulm]], [[German Empire]]\n"
             "| spouse = {{Plainlist|\n* [[Mileva Marić]] (1903–1919)\n* Elsa (1919–1936)\n}}\n"
             "| website = \n}}\n'''Albert Einstein''' was a physicist.")
    assert p.text == "Albert Einstein was a physicist."
    assert p.facts == [
        ("description", "German-born physicist", "shortdesc"),
        ("name", "Albert Einstein", "infobox:infobox scientist"),
        ("birth_date", "14 March 1879", "infobox:infobox scientist"),
        ("birth_place", "Ulm, German Empire", "infobox:infobox scientist"),
        ("spouse", "Mileva Marić (1903–1919); Elsa (1919–1936)", "infobox:infobox scientist"),
    ]
    assert p.links == [("Theory of relativity", "Theory of relativity"), ("Ulm", "Ulm"),
                       ("German Empire", "German Empire"), ("Mileva Marić", "Mileva Marić")]


def test_value_helpers():
    assert V.format_date("1879", "3", "14") == "14 March 1879"
    assert V.format_date("-43", "3", "15") == "15 March 44 BC"
    assert V.format_date("1879", "13", "1") == "1879-13-1"
    assert V.age_between(1879, 3, 14, 1955, 3, 13) == 75
    assert V.ordinal(11) == "11th" and V.ordinal(22) == "22nd" and V.ordinal(103) == "103rd"


def test_edge_cases_of_trails_and_fact_values():
    p = page("{{Infobox weather|record_low=-33 °C|months={{ubl|June|July}}}}"
             "[[Wikipedia:Manual|see]]s also [[#History|below]] and [[foo]]bar.")
    assert p.facts == [("record_low", "-33 °C", "infobox:infobox weather"),
                       ("months", "June; July", "infobox:infobox weather")]
    assert p.links == [("Foo", "foobar")]  # trails only extend a link this link made
    assert p.text == "sees also below and foobar."
