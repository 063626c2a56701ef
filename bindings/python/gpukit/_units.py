"""Quantities given by people: memory sizes ("2GiB", "1.5GB", 512) and SM amounts (a
fraction of the device or a count)."""
from __future__ import annotations

import math
import numbers
import re
from decimal import Decimal
from fractions import Fraction

__all__ = ["parse_memory", "sm_amount", "MEMORY_UNITS"]

# Exact multipliers. Units are matched case-insensitively and always mean bytes (never
# bits): "mb" is a megabyte. The Kubernetes spellings Ki, Mi, Gi, Ti are the binary units.
MEMORY_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40,
}
_UINT64_MAX = 2**64 - 1
_MEMORY_TEXT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")
_UNITS_TEXT = ("B, kB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB or Ki, Mi, Gi, Ti "
               "(powers of 1024)")


def parse_memory(value, what: str = "memory") -> int:
    """Bytes from an int (bytes), an integral float, or a string: a non-negative number,
    optionally with a fraction, then an optional unit: B, kB, MB, GB, TB (powers of 1000),
    KiB, MiB, GiB, TiB or Ki, Mi, Gi, Ti (powers of 1024), case-insensitive, with or without
    a space ("2GiB", "512 MiB", "1.5GB", "4096"). The result must be a whole number of
    bytes that fits in 64 bits. Raises ValueError (TypeError for other types) naming `what`
    and the value."""
    if isinstance(value, bool):
        raise TypeError(f"{what}: expected bytes (int) or a size string such as '2GiB', got "
                        f"bool {value!r}")
    if isinstance(value, numbers.Integral):
        n = int(value)
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ValueError(f"{what}: {value!r} is not a whole number of bytes")
        n = int(value)
    elif isinstance(value, str):
        m = _MEMORY_TEXT.match(value)
        if not m:
            raise ValueError(f"{what}: cannot read {value!r} as a size: expected a number and "
                             f"an optional unit, e.g. '2GiB', '512MiB', '1.5GB'")
        unit = m.group(2).lower()
        if unit not in MEMORY_UNITS:
            raise ValueError(f"{what}: unknown unit {m.group(2)!r} in {value!r}; use "
                             f"{_UNITS_TEXT}")
        exact = Decimal(m.group(1)) * MEMORY_UNITS[unit]
        if exact != exact.to_integral_value():
            raise ValueError(f"{what}: {value!r} is {exact} bytes, not a whole number of bytes")
        n = int(exact)
    else:
        raise TypeError(f"{what}: expected bytes (int) or a size string such as '2GiB', got "
                        f"{type(value).__name__}")
    if n < 0:
        raise ValueError(f"{what}: {value!r} is negative")
    if n > _UINT64_MAX:
        raise ValueError(f"{what}: {value!r} does not fit in 64 bits")
    return n


def sm_amount(value, sm_count: int, what: str = "sm") -> int:
    """SMs from a fraction 0 < x <= 1 of the device's `sm_count` (a float: rounded up, so
    any fraction gives at least one SM; 1.0 is every SM) or an SM count (an int >= 1).
    0 and None mean no SMs asked for and give 0. Raises ValueError (TypeError for other
    types) naming `what` and the value."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise TypeError(f"{what}: expected a fraction (0 < x <= 1) or an SM count (int >= 1), "
                        f"got bool {value!r}")
    if isinstance(value, numbers.Integral):
        n = int(value)
        if n < 0:
            raise ValueError(f"{what}: SM count {n} is negative")
        return n
    if isinstance(value, numbers.Real):
        x = float(value)
        if x == 0.0:
            return 0
        if not (0.0 < x <= 1.0):
            raise ValueError(f"{what}: {value!r} is not a fraction in (0, 1]; give an int for "
                             f"an SM count (this device has {sm_count} SMs)")
        # The decimal the caller wrote (0.1 is 1/10, not the nearest binary float), so
        # 0.1 of 10 SMs is exactly 1.
        return max(1, math.ceil(Fraction(repr(x)) * sm_count))
    raise TypeError(f"{what}: expected a fraction (0 < x <= 1) or an SM count (int >= 1), got "
                    f"{type(value).__name__}")
