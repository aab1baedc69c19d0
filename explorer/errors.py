"""The one exception type the library raises for bad user input."""


class ExplorerError(ValueError):
    """A clear, one-line message naming what is wrong with an input.

    The CLI prints it on stderr and exits 2; the app shows it inline.
    """
