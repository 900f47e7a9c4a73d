"""Byte sizes: parse '100M' / '64k' / '4MiB', print them back."""

import argparse
import re

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


def parse_size(text):
    """'100M', '100MiB', '20m', '100k', '4MiB', '65536' -> bytes (k/m/g = 1024^n)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)(?:i?[bB])?\s*", str(text))
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 100M, 100k, 65536)")
    return int(float(m.group(1)) * {"": 1, "k": KiB, "m": MiB, "g": GiB}[m.group(2).lower()])


def human(n):
    """1536 -> '1.5 KiB'; 3 MiB -> '3.00 MiB'."""
    n = float(n)
    if abs(n) >= MiB:
        return f"{n / MiB:.2f} MiB"
    if abs(n) >= KiB:
        return f"{n / KiB:.1f} KiB"
    return f"{int(n)} B"


def label(n):
    """Short exact label: 65536 -> '64K', 1048576 -> '1M'."""
    return f"{n // MiB}M" if n % MiB == 0 else f"{n // KiB}K" if n % KiB == 0 else str(n)
