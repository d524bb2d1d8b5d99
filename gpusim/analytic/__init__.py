"""Pure functions of (spec, inputs): occupancy, and later bank conflicts, coalescing, rooflines."""
