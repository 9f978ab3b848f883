"""How metric values are spelled in JSON, so that NaN and infinities survive a round trip.

Strict JSON has no NaN or Infinity. Python's ``json`` writes and reads the bare tokens ``NaN`` / ``Infinity``, but
``jq``, JavaScript and most other parsers reject a line that holds one, and a diverging run (a NaN loss) is exactly
the run whose log somebody wants to read. So non-finite values are written as the JSON *strings* ``"NaN"``,
``"Infinity"`` and ``"-Infinity"``: every line stays valid JSON, and ``float("NaN")`` / ``float("-Infinity")``
turn them back into floats in any Python reader (including the reference's ``check_metrics.py``, which calls
``float(v)`` on every value). Readers here also accept the bare tokens, for files written by other tools.
"""

from __future__ import annotations

import math
from typing import Any

NONFINITE_STRINGS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def encode_float(value: float) -> float | str:
    """The JSON-ready form of ``value``: the float itself when finite, otherwise one of ``NONFINITE_STRINGS``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def decode_float(raw: Any) -> float:
    """The float a stored JSON value stands for; ``ValueError`` for anything that is not a metric value.

    Booleans are refused although ``float(True)`` works: a ``true`` in a metrics file is a writer bug, not a 1.0.
    """
    if isinstance(raw, bool):
        raise ValueError(f"a metric value must be a number, got {raw!r}")
    if isinstance(raw, (int, float)):
        return float(raw)
    if isinstance(raw, str) and raw in NONFINITE_STRINGS:
        return NONFINITE_STRINGS[raw]
    raise ValueError(f"a metric value must be a number or one of {sorted(NONFINITE_STRINGS)}, got {raw!r}")


def format_value(value: Any) -> str:
    """A short human-readable rendering for tables (6 significant digits; tuples as ``(a, b)``)."""
    if value is None:
        return "N/A"
    if isinstance(value, tuple):
        return "(" + ", ".join(format_value(v) for v in value) + ")"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
