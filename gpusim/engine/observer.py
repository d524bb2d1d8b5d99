"""The observer protocol the engine calls (`gpusim.api.run(..., observer=obj)`): Observer, Tee, complete and
EVENTS of gpusim.stats.observer, where they are defined, below the engine, beside the recorders built on them."""

from __future__ import annotations

from ..stats.observer import EVENTS, Observer, Tee, complete

__all__ = ["EVENTS", "Observer", "Tee", "complete"]
