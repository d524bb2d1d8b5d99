"""Sampled simulation: a large kernel simulated in part (fewer loop trips, the tail wave and one full wave) and
its record projected (plan.py: which runs; project.py: the math; runner.py: projecting a record; parallel.py:
the runs on several cores)."""
