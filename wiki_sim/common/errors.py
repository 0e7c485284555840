"""The errors a user can fix: bad input (:class:`UserError`) and conditions of the machine
(:class:`UserOSError`)."""


class UserError(ValueError):
    """An error the user can fix: one line saying what was wrong and what to do.

    The ``websailor`` command prints it as ``websailor CMD: error: MESSAGE`` with exit status 2;
    any other exception is a bug and keeps its traceback. It subclasses ``ValueError`` because
    bad input is a bad value: callers (and tests) that catch ``ValueError`` still catch it.
    """


class UserOSError(OSError):
    """A condition of the machine the user can fix (a program to install, a kernel feature to
    enable), printed like a :class:`UserError`. A separate type because a class cannot derive from
    both ``ValueError`` and ``OSError``; code that catches ``OSError`` around system calls still
    catches it."""
