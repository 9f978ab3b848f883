"""The one error type of the configuration layer."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration or command line that cannot run.

    ``str(error)`` is one line that names the config path (or file, or option) and the fix; ``launch.py`` prints it
    as is and exits with status 2.  Newlines in the message are folded so the one-line contract holds for messages
    built from other exceptions.
    """

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
