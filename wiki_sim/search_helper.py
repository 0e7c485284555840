"""One search helper process (started by :mod:`wiki_sim.search_processes`, never by hand).

It opens the simulator the pool names, checks that it is the same build, then answers
``(query, k)`` messages with ``(hits, corrected_query)`` in order on a private copy of stdout.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from wiki_sim.search_processes import HelperGone, read_message, write_message
from wiki_sim.sim import WikiSim, build_fingerprint


def serve(path: str, snippet_chars: int, fingerprint: str) -> int:
    """A helper's loop: ``(query, k)`` messages in, ``(hits, corrected_query)`` out, in order."""
    # Answers go to a private copy of stdout; anything a library prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        sim = WikiSim(path, cache_size=0, snippet_chars=snippet_chars, search_processes=0)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which searches itself
        write_message(out, {"error": f"{type(exc).__name__}: {exc}"})
        return 1
    if build_fingerprint(sim.build_info) != fingerprint:
        write_message(out, {"error": "another build is in the directory now"})
        return 1
    write_message(out, {"ready": True})
    requests = sys.stdin.buffer
    while True:
        try:
            query, k = read_message(requests)
        except HelperGone:
            return 0  # the parent closed the pipe (or is gone)
        try:
            hits = sim.search([query], k)[0]
            answer: Any = ([(h.title, h.url, h.snippet, h.score) for h in hits], hits.corrected_query)
        except Exception as exc:  # noqa: BLE001 - the parent drops this helper and searches itself
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        write_message(out, answer)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python -m wiki_sim.search_helper DIR SNIPPET_CHARS FINGERPRINT "
                 "(started by WikiSim, not by hand)")
    sys.exit(serve(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
