"""Errors a user can fix: printed by the CLI as one line, with a non-zero exit."""


class WikiSimError(ValueError):
    """Bad input or a missing/unusable simulator; the message says what to do."""
