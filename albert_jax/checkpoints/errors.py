"""The one exception type of the converters."""

from albert_jax.errors import InputError


class ConversionError(InputError):
    """A source that cannot be converted exactly: the message says what is wrong and where."""
