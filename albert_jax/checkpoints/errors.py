"""The one exception type of the converters."""


class ConversionError(ValueError):
    """A source that cannot be converted exactly: the message says what is wrong and where."""
