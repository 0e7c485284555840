"""The research filter's shortcut attack stops at the first search that finds the answer."""

from __future__ import annotations

from sailorfog.attacks import first_shortcut, shortcut_ranks


NOISE = ("some quiet people walked along grey roads under heavy rain while distant bells rang softly "
         "across empty fields and nobody spoke about the long winter that had passed")


class CountingSim:
    """A simulator that counts the queries it is asked."""

    def __init__(self, sim):
        self.sim, self.queries = sim, 0

    def ranked_titles(self, queries, k=10):
        self.queries += len(queries)
        return self.sim.ranked_titles(queries, k=k)


def test_the_first_shortcut_is_the_first_rank_found_with_fewer_searches(toy_sim):
    titles = [t for t in ("Velmora Observatory", "Idris Kallan", "Mount Ostrel", "Harlow Optics")]
    for title in titles:
        words = toy_sim.page(title)["text"].split()
        for question in (" ".join(words[:14]), "Which place is this? It is cold, wet, and far from any sea.",
                         "A thing, " + " ".join(words[20:34]) + ", and more besides. What is it?",
                         NOISE + " " + " ".join(words[2:9]) + " " + NOISE):
            ranks = shortcut_ranks(toy_sim, question, {title})
            counting = CountingSim(toy_sim)
            found = first_shortcut(counting, question, {title})
            assert found == next((k for k, r in ranks.items() if r is not None), None)
            if found == "whole":
                assert counting.queries == 1
