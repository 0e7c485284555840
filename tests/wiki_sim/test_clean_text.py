"""Text a reader can use: formulas as readable text, no empty brackets or holes left by stripped markup."""

from __future__ import annotations

import pytest

from wiki_sim import WikiSim
from wiki_sim.ingest.tex import tex_to_text
from wiki_sim.ingest.wikitext import parse_page


@pytest.mark.parametrize("tex, text", [
    (r"\frac{n!}{k!(n-k)!}", "(n!)/(k!(n-k)!)"),
    (r"\displaystyle E = mc^{2}", "E = mc^2"),
    (r"\sqrt{x^2+y^2}", "√(x^2+y^2)"),
    (r"\alpha \le \beta", "α ≤ β"),
    (r"\mathrm{Na}_{2}\mathrm{CO}_3", "Na_2CO_3"),
    (r"\frac{\frac{1}{2}}{3}", "(1/2)/3"),
    (r"\unknowncommand{x}", "unknowncommand x".replace(" ", "")),
])
def test_tex_to_text(tex, text):
    assert tex_to_text(tex) == text


@pytest.mark.timeout(30)
def test_tex_to_text_is_linear_on_hostile_input():
    assert tex_to_text("\\frac{" * 200_000)  # returns (nesting it cannot close is left as text)


def test_math_in_a_dump_page_stays_readable():
    page = parse_page("Factorial", "The factorial of <math>n</math>, denoted by <math>n!</math>, is "
                      "<math>\\prod_{k=1}^{n} k</math>. A chair ({{IPA|tʃɛər}}) is a seat.")
    assert "factorial of n, denoted by n!, is ∏_(k=1)^n k." in page.text
    assert "( )" not in page.text and "()" not in page.text


def test_default_corpus_has_no_empty_brackets_or_spaced_commas(default_wiki):
    with WikiSim(default_wiki) as sim:
        assert sim.page("Chair")["text"].startswith("A chair is a type of seat")
        factorial = sim.page("Factorial")["text"]
        assert " , " not in factorial and "( )" not in factorial
