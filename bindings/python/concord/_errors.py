"""concord.Error: what the C++ core raises, with its error code."""


class Error(RuntimeError):
    """A concord failure. ``code`` is the C++ ``concord::ErrorCode`` name
    (e.g. ``"invalid argument"``), ``code_value`` its number, and the message
    names the rank and the cause."""

    def __init__(self, code: str, code_value: int, message: str):
        super().__init__(message)
        self.code = code
        self.code_value = code_value
        self.message = message
