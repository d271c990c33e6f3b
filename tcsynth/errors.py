"""The one error type a user sees: every mistake the user can fix is a :class:`UserError`.

Each layer raises its own subclass (a data directory that does not read, a build input that does not
check, an export that cannot be written, ...), so a caller can tell them apart; the command line catches
this base class and prints its message as one ``error:`` line, never a traceback.
"""


class UserError(ValueError):
    """A problem with what the user asked for or gave; the message names the value and says what to do."""
