"""The one exception type the command line turns into a one-line message (never a traceback)."""


class GpusimError(Exception):
    """A user-facing error: bad input file, unknown name, impossible request.

    The message is a single line that names the file or flag, the field and what was expected.
    """


class ArchError(GpusimError):
    """An architecture file or name that cannot be loaded."""
