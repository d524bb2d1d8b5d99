"""How far a sampled projection moves when its reduced runs are nudged: the spread behind one row of the accuracy
table (validation/sampling_accuracy.py).

A plan that samples waves with loop trips starts each reduced run's first blocks spread over the pilot run's cycles
(the stagger, see gpusim.sampling). This script reruns such a plan with that spread changed by a few cycles
(`--deltas`), which changes nothing a user would call a different kernel, and reports each projection against
the full run's cycles. Each sampled run takes the whole machine; results go to
validation/results/sampling-spread.json.

    python validation/sampling_spread.py                       # the three GEMMs with full runs on record
    python validation/sampling_spread.py --rows a100 --deltas 0 1
    python validation/sampling_spread.py --rows default --deltas 0 1 -1 2 3 --sync-window 64 --out F.json

`--sync-window W` runs the reduced runs (and the pilot) lax-synchronised (gpusim.engine.gpu), measured against
the same exact full runs: what lax synchronisation would cost the sampled projection.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gpusim  # noqa: E402
import gpusim.api as api  # noqa: E402
from gpusim.options import check_sync_window  # noqa: E402

GEMM = ROOT / "workloads" / "gemm_tile128_sync.yaml"
# the plans that sample waves with loop trips there: (label, arch, parameters, the full run's cycles, measured with
# --sample off on the 2-core development machine; the engine's sources unchanged since)
SPREAD_ROWS = [("gemm_tile128 4096^3 (default)", "h100", {}, 883_142),
               ("gemm_tile128 4096x4096x1024", "h100", {"K": 1024}, 236_045),
               ("gemm_tile128 4096x4096x1024", "a100", {"K": 1024}, 343_896)]


def rows() -> list[tuple[str, str, dict, int]]:
    """(label, arch, parameters, the full run's cycles) of each row."""
    return list(SPREAD_ROWS)


def sampled_with_stagger_delta(arch: str, params: dict, delta: int, **options) -> dict:
    """The sampled record with every staggered reduced run's spread `delta` cycles longer than the pilot's
    (`options`: more of gpusim.run's)."""
    run_kernel = api.simulate_kernel

    def nudged(kernel, spec, run_options, hooks=None, **run):
        if run.get("stagger"):
            run["stagger"] += delta
        return run_kernel(kernel, spec, run_options, hooks, **run)

    api.simulate_kernel = nudged
    try:
        started = time.perf_counter()
        result = gpusim.run(GEMM, arch, params=params, sample="on", **options)
        wall = time.perf_counter() - started
    finally:
        api.simulate_kernel = run_kernel
    sampling = result.sampling
    return {"delta": delta, "cycles": result.metrics["gpu_sim_cycle"],
            "error_estimate_pct": sampling.get("error_estimate_pct"),
            "runs": [r["cycles"] for r in sampling["simulated_runs"]],
            "stagger_cycles": sampling.get("stagger_cycles", 0) + delta, "sync_window": result.sync_window,
            "wall_s": round(wall, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="*", help="keep the rows whose label or arch contains one of these")
    parser.add_argument("--deltas", nargs="*", type=int, default=[0, 1, -1, 2], help="stagger changes, cycles")
    parser.add_argument("--sync-window", type=int, default=1, metavar="CYCLES",
                        help="run the reduced runs lax-synchronised, W cycles (default 1: exact)")
    parser.add_argument("--out", default=str(ROOT / "validation" / "results" / "sampling-spread.json"))
    parser.error = lambda message: sys.exit(f"sampling_spread.py: {message}")  # one line, not the usage too
    args = parser.parse_args(argv)
    try:
        check_sync_window(args.sync_window)
    except gpusim.GpusimError as exc:
        print(f"sampling_spread.py: {exc}", file=sys.stderr)
        return 1
    every = rows()
    chosen = [r for r in every if not args.rows or any(k in r[0] or k == r[1] for k in args.rows)]
    if not chosen or not args.deltas:
        what = f"--rows {' '.join(args.rows)}: no row's label or arch contains one of them" if not chosen else \
            "--deltas: expected at least one change of the stagger, in cycles"
        print(f"sampling_spread.py: {what}; the rows: " + "; ".join(f"'{label}' on {arch}"
                                                                     for label, arch, _, _ in every), file=sys.stderr)
        return 1
    out = []
    for label, arch, params, full in chosen:
        draws = [sampled_with_stagger_delta(arch, params, d, sync_window=args.sync_window) for d in args.deltas]
        for draw in draws:
            draw["error_pct"] = round(100 * (draw["cycles"] - full) / full, 2)
        errors = [d["error_pct"] for d in draws]
        out.append({"label": label, "arch": arch, "sync_window": args.sync_window, "cycles_full": full, "draws": draws,
                    "error_pct_min": min(errors), "error_pct_max": max(errors),
                    "error_pct_mean": round(sum(errors) / len(errors), 2)})
        print(f"{label} on {arch}: sampled against full {full:,} cycles: "
              + ", ".join(f"{d['error_pct']:+.1f}% (stagger {d['delta']:+d})" for d in draws), flush=True)
    Path(args.out).write_text(json.dumps({"machine": platform.platform(), "date": str(date.today()),
                                          "rows": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
