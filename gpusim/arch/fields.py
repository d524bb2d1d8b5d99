"""The validators and the field declaration every spec class uses: each field carries a one-line description, a
unit and (from its validator) the accepted range in its metadata, which `gpusim archs --fields` and the documentation
print. Validators refuse booleans, NaN, infinities and values outside generous but finite ranges."""

from __future__ import annotations

import re

import attrs

from ..errors import shorten

KIB, MIB, GIB = 2**10, 2**20, 2**30
MAX_CYCLES = 100_000  # every latency: far above any real part's, finite so a run stays bounded


class NumberRange:
    """A numeric field's validator: refuses booleans, NaN, infinities and values outside [lo, hi];
    `text` states the range (the field's metadata carries it, so the schema shows it)."""

    def __init__(self, lo, hi, *, integer: bool = True, lo_open: bool = False, power_of_two: bool = False):
        self.lo, self.hi, self.integer, self.lo_open, self.power_of_two = lo, hi, integer, lo_open, power_of_two
        span = f"{lo:,} to {hi:,}" if lo != hi else f"{lo:,}"
        if power_of_two:
            self.text = f"a power of two from {span}"
        elif integer:
            self.text = f"a positive integer up to {hi:,}" if lo == 1 else f"an integer from {span}"
        else:
            self.text = f"a positive number up to {hi:,}" if lo_open and lo == 0 else f"a number from {span}"
        if power_of_two and lo == hi:
            self.text = f"{lo}"

    def __call__(self, instance, attribute, value):
        kind = (int,) if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ValueError(f"{attribute.name}: expected {'an integer' if self.integer else 'a number'}, "
                             f"got {shorten(value)}")
        above = value > self.lo if self.lo_open else value >= self.lo
        if not (above and value <= self.hi) or (self.power_of_two and value & (value - 1)):
            raise ValueError(f"{attribute.name}: expected {self.text}, got {shorten(value)}")


def count_range(hi, lo=1):
    """An integer in [lo, hi]."""
    return NumberRange(lo, hi)


def power_of_two(hi, lo=1):
    return NumberRange(lo, hi, power_of_two=True)


def number_range(lo, hi):
    """A finite float in [lo, hi], or in (0, hi] when lo is 0."""
    return NumberRange(lo, hi, integer=False, lo_open=lo == 0)


class OrAbsent:
    """None, or what `inner` accepts."""

    def __init__(self, inner, text: str | None = None):
        self.inner, self.text = inner, text or f"{inner.text}, or absent"

    def __call__(self, instance, attribute, value):
        if value is not None:
            self.inner(instance, attribute, value)


class UnitFraction(NumberRange):
    def __init__(self):
        super().__init__(0, 1, integer=False, lo_open=True)
        self.text = "a fraction in (0, 1]"


class TextLine:
    """A one-line printable string of at most `limit` characters (it appears in messages and tables)."""

    def __init__(self, limit: int, pattern: str | None = None, what: str = ""):
        self.limit, self.pattern = limit, pattern and re.compile(pattern)
        self.text = what or f"one line of at most {limit} printable characters"

    def __call__(self, instance, attribute, value):
        if not isinstance(value, str):
            raise ValueError(f"{attribute.name}: expected a string, got {shorten(value)}")
        if len(value) > self.limit or not value.isprintable() or (self.pattern and not self.pattern.fullmatch(value)):
            raise ValueError(f"{attribute.name}: expected {self.text}, got {shorten(value)}")


def spec_field(doc: str, unit: str = "", validator=None, **kw):
    """An attrs field with its description, unit and (from the validator) the accepted range in metadata."""
    valid_range = getattr(validator, "text", "")
    return attrs.field(validator=validator, metadata={"doc": doc, "unit": unit, "range": valid_range}, **kw)


class TrueOrFalse:
    """A boolean (true or false in YAML; a number is refused)."""

    text = "true or false"

    def __call__(self, instance, attribute, value):
        if not isinstance(value, bool):
            raise ValueError(f"{attribute.name}: expected true or false, got {shorten(value)}")
