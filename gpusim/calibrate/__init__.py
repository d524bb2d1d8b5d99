"""Calibrate an arch file from microbenchmark results, and validate the engine on CUDA twins of the workloads.

`calibrate(results, base, out)` writes an arch file whose measured fields come from validation/microbench.cu's
results (each with a comment naming the device, driver, date and kernel) and whose other fields are the base
file's; `gpusim calibrate` runs the microbenchmarks first where there is a GPU. `gpusim validate` times the CUDA
twins of the shipped workloads (validation/kernels/) and compares gpusim's simulated time with them.
"""

from .derive import Calibration
from .results import Results
from .run import calibrate, dry_run

__all__ = ["Calibration", "Results", "calibrate", "dry_run"]
