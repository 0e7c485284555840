"""One pool of search helpers per simulator folder per process, whatever the number of
WikiSim objects open on it; a helper that dies is replaced."""

from __future__ import annotations

import os
import time

from wiki_sim import WikiSim
from wiki_sim.search_processes import MAX_RESTARTS_PER_HELPER, live_helpers


def helper_children() -> list[int]:
    """Pids of this process's children that run a search helper (from /proc)."""
    me, found = str(os.getpid()), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = f.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if ppid == me and b"wiki_sim.search_helper" in cmd:
            found.append(int(entry))
    return found


def wait(predicate, seconds=120.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_six_simulators_on_one_folder_share_one_pool(gensim_wiki):
    # Counted relative to what is already running: other tests of the same process may hold pools
    # of their own (on other folders), which this test must not count.
    before, children_before = live_helpers(), set(helper_children())
    sims = [WikiSim(gensim_wiki, cache_size=0, search_processes=2) for _ in range(6)]
    try:
        for sim in sims:
            sim.searches._start_helpers()
        wait(lambda: live_helpers() - before == 2)
        time.sleep(0.5)  # nothing else is starting
        assert live_helpers() - before == 2 and len(set(helper_children()) - children_before) == 2
        assert all(sim.searches.helpers() == 2 for sim in sims)
        while len(sims) > 1:
            sims.pop().close()
        assert len(set(helper_children()) - children_before) == 2  # the last one open keeps them
    finally:
        for sim in sims:
            sim.close()
    wait(lambda: not set(helper_children()) - children_before, 30)
    assert live_helpers() == before


def test_a_dead_helper_is_restarted_within_a_bound(gensim_wiki):
    with WikiSim(gensim_wiki, cache_size=0, search_processes=1) as sim:
        pool = sim.searches._pool
        sim.searches._start_helpers()
        wait(lambda: sim.searches.helpers() == 1)
        first = pool.helpers[0]
        first.proc.kill()
        first.proc.wait()
        assert pool.pick() is None or pool.helpers[0] is not first  # the dead one is dropped at once
        wait(lambda: sim.searches.helpers() == 1 and pool.helpers[0] is not first)
        assert sim.searches.failures == 1
        assert sim.search(["capital of Albania"])[0] == sim.searcher.search("capital of Albania", 10)
        for _ in range(MAX_RESTARTS_PER_HELPER + 2):  # a helper that keeps dying is not restarted for ever
            wait(lambda: pool.helpers or pool.starting == 0)
            for helper in list(pool.helpers):
                helper.proc.kill()
                helper.proc.wait()
            pool.pick()
            wait(lambda: pool.starting == 0)
        assert sim.searches.failures <= 1 + MAX_RESTARTS_PER_HELPER
        assert sim.searches.helpers() == 0 and pool.pick() is None
