"""Errors a user can fix: printed by the CLI as one line, with a non-zero exit."""

from wiki_sim.common.errors import UserError


class WikiSimError(UserError):
    """Bad input or a missing/unusable simulator; the message says what to do."""
