"""The one type of error a user can fix."""


class UserError(ValueError):
    """An error the user can fix: one line saying what was wrong and what to do.

    The ``websailor`` command prints it as ``websailor CMD: error: MESSAGE`` with exit status 2;
    any other exception is a bug and keeps its traceback. It subclasses ``ValueError`` because
    bad input is a bad value: callers (and tests) that catch ``ValueError`` still catch it.
    """
