"""Errors a user can act on. The CLI prints their message as one line, never a traceback."""


class UserError(Exception):
    """Bad input or a condition the user must fix; the message says what and how."""

    exit_code = 2


class Failure(Exception):
    """The work could not produce a result (nothing computed)."""

    exit_code = 1


class DiskFull(Failure):
    """The disk filled up while writing a result: nothing half-written is left."""


class Interrupted(Exception):
    """The user pressed Ctrl-C; whatever was finished is kept."""

    exit_code = 130

    def __init__(self, message: str = "interrupted"):
        super().__init__(message)
