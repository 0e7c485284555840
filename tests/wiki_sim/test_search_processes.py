"""Searches that run at once go to helper processes: exactly the answers of one thread,
never a helper for a single-threaded caller, and a helper that dies costs nothing."""

from __future__ import annotations

import threading
import time

import pytest

from wiki_sim import WikiSim
from wiki_sim.search_processes import HelperGone, SearchProcesses, _Helper
from wiki_sim.sim import build_fingerprint

QUERIES = [
    "theory of relativity photoelectric effect", "objectivism novelist philosophy", "sixteenth president Illinois",
    "alkali metals lithium sodium reactive", "Greek philosopher student of Plato", "Anarchism stateless societies",
    "capital of Albania", "astronaut moon landing Apollo program", "Einstien relativity", "Aristotel",
    "Academy Award best production design", "autism diagnosis children",
]


def as_tuples(hits):
    return [(h.title, h.url, h.snippet, h.score) for h in hits], hits.corrected_query


def wait_for_helpers(searches: SearchProcesses, n: int) -> None:
    deadline = time.monotonic() + 120
    while searches.helpers() < n:
        assert time.monotonic() < deadline, "helper processes did not start"
        time.sleep(0.05)


def test_threads_searching_at_once_get_what_one_thread_gets_from_helpers(gensim_wiki):
    with WikiSim(gensim_wiki, cache_size=0, search_processes=0) as serial:
        expected = {q: as_tuples(serial.search([q], k=5)[0]) for q in QUERIES}
    assert any(corrected for _, corrected in expected.values())  # the spelling retry crosses the pipe too
    with WikiSim(gensim_wiki, cache_size=0, search_processes=2) as shared:
        shared.searches._start_helpers()
        wait_for_helpers(shared.searches, 2)
        got, errors = [], []

        def work(chunk):
            try:
                got.extend((q, as_tuples(shared.search([q], k=5)[0])) for q in chunk)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        queries = QUERIES * 6
        workers = [threading.Thread(target=work, args=(queries[i::8],)) for i in range(8)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert not errors and len(got) == len(queries)
        assert all(result == expected[q] for q, result in got)
        assert shared.searches.helper_searches > 0 and shared.searches.failures == 0
        assert shared.stats()["search_processes"]["serving"] == 2
        helpers = list(shared.searches._helpers)
    assert all(h.proc.poll() is not None for h in helpers)  # closing the simulator ends its helpers


def test_one_thread_never_starts_a_helper(gensim_wiki):
    with WikiSim(gensim_wiki, cache_size=0, search_processes=2) as sim:
        for q in QUERIES:
            sim.search([q])
        assert sim.searches.helpers() == 0 and not sim.searches._starting


def test_a_dead_helper_is_dropped_and_its_search_answered_here(gensim_wiki):
    with WikiSim(gensim_wiki, cache_size=0, search_processes=0) as sim:
        expected = as_tuples(sim.search([QUERIES[0]])[0])
        blocked, release = threading.Event(), threading.Event()

        def local(query, k):
            if query == "block":
                blocked.set()
                release.wait(30)
            return sim.searcher.search(query, k)

        searches = SearchProcesses(sim.path, local, 1, sim.snippet_chars, build_fingerprint(sim.build_info))
        try:
            searches._start_helpers()
            wait_for_helpers(searches, 1)
            searches._helpers[0].proc.kill()
            searches._helpers[0].proc.wait()
            busy = threading.Thread(target=searches.search, args=("block", 10))
            busy.start()  # keeps the calling process busy: the next search goes to the (dead) helper
            assert blocked.wait(30)
            assert as_tuples(searches.search(QUERIES[0], 10)) == expected
            assert searches.failures == 1 and searches.helpers() == 0 and searches.helper_searches == 0
            release.set()
            busy.join()
        finally:
            release.set()
            searches.close()


def test_a_helper_refuses_another_build(gensim_wiki):
    with pytest.raises(HelperGone, match="another build"):
        _Helper(gensim_wiki, 300, "not-this-build")


@pytest.mark.parametrize("bad", [-1, True, 1.5, "2"])
def test_bad_search_processes_is_refused(gensim_wiki, bad):
    with pytest.raises(ValueError, match="search_processes must be None or an integer >= 0, got"):
        WikiSim(gensim_wiki, search_processes=bad)
