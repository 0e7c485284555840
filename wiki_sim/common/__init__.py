"""The ground floor: what every package of the project uses, depending on nothing of the project.

- :mod:`wiki_sim.common.errors`: :class:`UserError`, the one type of error a user can fix;
- :mod:`wiki_sim.common.jsonl`: reading JSONL with errors that name ``file:line``, and the one
  family of atomic writers (temporary file in the same folder, fsync, rename);
- :mod:`wiki_sim.common.chat`: the client for OpenAI-compatible chat endpoints
  (:mod:`wiki_sim.common.fake_chat` is its loopback test server);
- :mod:`wiki_sim.common.wheels`: files fetched from pinned PyPI wheels into the cache folder.

It lives inside ``wiki_sim``, the lowest package, because the design card fixes the top-level
layout; every package may import it, and it imports nothing of the project outside itself (a
test over the imports keeps it so). Importing this package imports none of its modules.
"""
