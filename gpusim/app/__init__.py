"""Applications: commands on CUDA-like streams over one or more GPUs (kernels simulated cycle by cycle, copies,
events, all-reduces), run on simpy. `run_app(app_or_path, arch)` returns an AppResult; an Application can be built
in Python from the command classes or read from a YAML file or a `kernelslist.g` (docs/reference/app-format.md).

`commands` holds the application's values, `format` reads files, `kernels` the kernel results and their cache,
`transfers` the copy and all-reduce times, `resources` the shared SMs, copy engines and links, `runner` the simpy
model and `result` what it returns.
"""

from .commands import (AllReduceCommand, AppError, Application, CopyCommand, KernelCommand, RecordCommand,
                       WaitCommand, check_application)
from .format import load_application
from .kernels import KernelCache, KernelResult, kernel_result
from .result import Activity, AppResult
from .runner import DEFAULT_CACHE, run_app

__all__ = ["Activity", "AllReduceCommand", "AppError", "AppResult", "Application", "CopyCommand", "DEFAULT_CACHE",
           "KernelCache", "KernelCommand", "KernelResult", "RecordCommand", "WaitCommand", "check_application",
           "kernel_result", "load_application", "run_app"]
