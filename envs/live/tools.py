"""The live tools now live in :mod:`envs.tools` (one schema per tool for both environments);
these names keep working."""

from envs.tools.registry import LIVE_DEFAULT_TOOLS, make_tool
from envs.tools.search import (MAX_QUERIES, SCHOLAR_DESCRIPTION, SEARCH_DESCRIPTION, SEARCH_PARAMETERS, SEPARATOR,
                               LiveSearchTool)
from envs.tools.visit import MAX_URLS, VISIT_DESCRIPTION, VISIT_PARAMETERS, LiveVisitTool

__all__ = ["LiveSearchTool", "LiveVisitTool", "LiveTools", "SEPARATOR", "MAX_QUERIES", "MAX_URLS",
           "SEARCH_DESCRIPTION", "SCHOLAR_DESCRIPTION", "SEARCH_PARAMETERS", "VISIT_DESCRIPTION", "VISIT_PARAMETERS"]


class LiveTools:
    """Names -> tools over one :class:`~envs.live.manager.LiveWeb` (:func:`envs.tools.make_tool`)."""

    NAMES = LIVE_DEFAULT_TOOLS

    @staticmethod
    def make(name: str, web):
        return make_tool(name, web=web)
