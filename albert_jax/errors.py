"""The base of the project's input errors: a bad file, field or value, whose message names what is
wrong. Every entry point reports one as a single `error: MESSAGE` line with exit status 2 (`cli`);
anything else keeps its traceback. The bottom layer: every package may import it."""


class InputError(ValueError):
    """Input that cannot work (a file, config field or argument); the message says what to
    change. Subclass it, not ValueError, for a new kind of input error: the CLI catches this."""
