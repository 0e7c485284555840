"""One adapter per live source: request format, reply parsing, errors mapped to the taxonomy.

Search and scholar adapters return :class:`~envs.live.adapters.base.Hit` lists, readers a
:class:`~envs.live.adapters.base.PageText`, the summarizer a :class:`wiki_sim.focus.Focused`;
each wrapped in a :class:`~envs.live.adapters.base.Reply` that says whether the cache answered.
"""

from envs.live.adapters.base import Hit, PageText, Reply

__all__ = ["Hit", "PageText", "Reply"]
