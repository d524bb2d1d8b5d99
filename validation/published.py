"""Compare gpusim with published hardware measurements of whole kernels (validation/published.yaml).

    python validation/published.py [--rows ID,...] [--jobs N] [--json PATH] [--table PATH] [--list]

Every row of the table names a shipped workload, an architecture, the published shape (workload parameters) and
the published number with its source. The workload is simulated with gpusim.run(..., sample="auto") and the
result converted to the row's metric:

    tflops          flop / gpu__time_duration.sum / 1e12 (flop: the row's expression over the parameters)
    gbs             bytes / gpu__time_duration.sum / 1e9 (bytes: likewise)
    time_us         gpu__time_duration.sum x 1e6
    latency_cycles  d gpu_sim_cycle / d param between two runs (a `marginal` row)

A row with `clock:` (boost, sustained or MHz, as `gpusim run --clock`) is simulated at that SM clock: `sustained`
where the published run kept the tensor cores busy on a power-limited part whose arch file has a measured clock
under tensor load. A row with `carveout:` (a percentage, as `gpusim run --carveout`) runs with the shared-memory
carveout the published program chose (its occupancy). A row with `marginal: {param, short, long}` is simulated
twice, with `param` at `short` and at `long`, and reports the difference (d flop / d time, d bytes / d time, d
cycles / d param): the cost of the extra loop trips alone, as a timed loop measures it on the hardware. Kernels too
long to simulate in full run sampled (gpusim's --sample auto); one whose projection states an error wider than
+-15% (the agreement a row is held to) is simulated again in full, the record keeping the rejected sample's
estimate. The table printed is `id | arch | published | simulated | ratio`, then the mean and the worst of
|simulated / published - 1| over the rows simulated. The JSON record (--json, default
validation/results/published.json) holds the command, the commit, the machine, the date and every row with the
metrics of its runs. Large errors are the output, not a failure: the exit status is 0 unless a row's simulation
failed (1; its one-line error is printed in the table) or the table itself is malformed (2)."""

from __future__ import annotations

import argparse
import ast
import json
import operator
import os
import platform
import shlex
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from gpusim.api import run
from gpusim.errors import GpusimError
from gpusim.options import check_clock
from gpusim.workload.overrides import check_launch_overrides

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TABLE = HERE / "published.yaml"
DEFAULT_JSON = HERE / "results" / "published.json"

CYCLES, TIME = "gpu_sim_cycle", "gpu__time_duration.sum"  # cycles; seconds (gpusim.stats.declared)
KEPT = (CYCLES, TIME, "smsp__inst_executed.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "dram__bytes.sum")
UNITS = {"tflops": "TFLOP/s", "gbs": "GB/s", "time_us": "us", "latency_cycles": "cycles"}
FORMULA = {"tflops": "flop", "gbs": "bytes"}  # the expression a metric needs
ORDER = ("tflops", "time_us", "gbs", "latency_cycles")  # the long simulations first
TOLERANCE_PCT = 15.0  # the agreement a row is held to (+-15%): a sampled run stating a wider error runs in full
SAMPLING_KEPT = ("method", "detail", "error_estimate_pct", "dram_error_estimate_pct")


class TableError(Exception):
    """A malformed table or row: reported before anything is simulated."""


# --- the table -------------------------------------------------------------------------------------------------

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def evaluate(expr, names: dict) -> float:
    """An arithmetic expression (numbers, parameter names, + - * / // % **, parentheses) over `names`."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise TableError(f"{expr!r}: no parameter {node.id!r}")
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            return ev(node.operand) if isinstance(node.op, ast.UAdd) else -ev(node.operand)
        raise TableError(f"{expr!r}: only numbers, parameter names and + - * / // % ** are allowed")
    try:
        tree = ast.parse(str(expr), mode="eval")
    except SyntaxError as exc:
        raise TableError(f"{expr!r}: {exc.msg}") from None
    return ev(tree)


@dataclass(frozen=True)
class Sim:
    """One gpusim.run call: workload (path from the repository root), arch, parameters, SMs (None: all)."""

    workload: str
    arch: str
    params: tuple[tuple[str, object], ...]
    sms: int | None = None
    clock: str | float = "boost"  # gpusim run --clock
    carveout: int | None = None  # gpusim run --carveout (the published program's occupancy)


@dataclass(frozen=True)
class Row:
    id: str
    workload: str
    arch: str
    params: dict
    metric: str
    published: float
    source: str
    differs: str
    formula: str | None  # flop or bytes expression
    marginal: tuple[str, float, float] | None  # (param, short, long)
    sms: int | None
    defaults: dict  # the workload's own parameter values (for the formula)
    clock: str | float = "boost"  # the SM clock simulated (--clock): the one the published run held, where known
    carveout: int | None = None  # the shared-memory carveout (--carveout) the published program set, where it did

    def sims(self) -> list[Sim]:
        if self.marginal is None:
            settings = [self.params]
        else:
            name, short, long = self.marginal
            settings = [{**self.params, name: v} for v in (short, long)]
        return [Sim(self.workload, self.arch, tuple(sorted(p.items())), self.sms, self.clock, self.carveout)
                for p in settings]

    def names(self, sim: Sim) -> dict:
        return {**self.defaults, **dict(sim.params)}

    def record(self) -> dict:
        return {"id": self.id, "workload": self.workload, "arch": self.arch, "set": self.params,
                "marginal": None if self.marginal is None else dict(zip(("param", "short", "long"), self.marginal)),
                "sms": self.sms, "clock": self.clock, "carveout": self.carveout, "metric": self.metric,
                "unit": UNITS[self.metric],
                "formula": self.formula, "published": self.published, "source": self.source, "differs": self.differs}


def _text(value, what: str, rid: str) -> str:
    """A string, or a list of strings read as one (a shared citation, then the row's own entry)."""
    if isinstance(value, str) and value.strip():
        return " ".join(value.split())
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return "; ".join(" ".join(v.split()) for v in value)
    raise TableError(f"row {rid}: {what} must be a non-empty string or a list of strings")


def _workload_defaults(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    params = doc.get("params") if isinstance(doc, dict) else None
    return dict(params) if isinstance(params, dict) else {}


def parse_row(raw, arches: set[str]) -> Row:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        raise TableError(f"a row without an id: {str(raw)[:80]}")
    rid = raw["id"]
    for key in ("workload", "arch", "metric", "published", "source", "differs"):
        if key not in raw:
            raise TableError(f"row {rid}: no {key!r}")
    metric = raw["metric"]
    if metric not in UNITS:
        raise TableError(f"row {rid}: metric {metric!r}: expected one of {', '.join(UNITS)}")
    workload = str(raw["workload"])
    if not (ROOT / workload).is_file():
        raise TableError(f"row {rid}: workload {workload}: no such file")
    if raw["arch"] not in arches:
        raise TableError(f"row {rid}: arch {raw['arch']!r}: expected one of {', '.join(sorted(arches))}")
    params = raw.get("set") or {}
    if not isinstance(params, dict):
        raise TableError(f"row {rid}: set must be a mapping of workload parameters")
    published = raw["published"]
    if type(published) not in (int, float) or published <= 0:
        raise TableError(f"row {rid}: published must be a positive number")
    formula = None
    if metric in FORMULA:
        formula = raw.get(FORMULA[metric])
        if formula is None:
            raise TableError(f"row {rid}: metric {metric} needs a {FORMULA[metric]!r} expression")
        formula = str(formula)
    marginal = raw.get("marginal")
    if marginal is not None:
        if not (isinstance(marginal, dict) and set(marginal) == {"param", "short", "long"}
                and type(marginal["short"]) in (int, float) and type(marginal["long"]) in (int, float)
                and marginal["long"] > marginal["short"]):
            raise TableError(f"row {rid}: marginal must be {{param, short, long}} with long > short")
        if metric == "time_us":
            raise TableError(f"row {rid}: time_us is a whole kernel's time: no marginal")
        marginal = (str(marginal["param"]), marginal["short"], marginal["long"])
    elif metric == "latency_cycles":
        raise TableError(f"row {rid}: latency_cycles needs a marginal {{param, short, long}} (cycles per step)")
    sms = raw.get("sms")
    if sms is not None and not (type(sms) is int and sms >= 1):
        raise TableError(f"row {rid}: sms must be an integer >= 1")
    clock = raw.get("clock", "boost")
    try:
        check_clock(clock)
    except GpusimError as exc:
        raise TableError(f"row {rid}: clock: {exc}") from None
    carveout = raw.get("carveout")
    if carveout is not None:
        try:
            carveout = check_launch_overrides(carveout=carveout).carveout
        except GpusimError as exc:
            raise TableError(f"row {rid}: carveout: {exc}") from None
    row = Row(rid, workload, raw["arch"], dict(params), metric, float(published), _text(raw["source"], "source", rid),
              _text(raw["differs"], "differs", rid), formula, marginal, sms, _workload_defaults(ROOT / workload), clock,
              carveout)
    if formula is not None:
        for sim in row.sims():
            evaluate(formula, row.names(sim))  # a name the parameters lack is the table's error, found now
    return row


def load_rows(path: Path) -> tuple[list[Row], list]:
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise TableError(f"{path}: expected a mapping with a list under 'rows:'")
    arches = {p.stem for p in (ROOT / "arch").glob("*.yaml")}
    rows = [parse_row(raw, arches) for raw in doc["rows"]]
    seen: set[str] = set()
    for row in rows:
        if row.id in seen:
            raise TableError(f"row id {row.id} appears twice")
        seen.add(row.id)
    return rows, list(doc.get("not_simulated") or [])


# --- simulation ------------------------------------------------------------------------------------------------

def one_line(exc: BaseException) -> str:
    text = str(exc).strip().replace(f"{ROOT}{os.sep}", "").splitlines()  # paths from the repository root
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def simulate(sim: Sim) -> dict:
    """The run's kept metrics, or its one-line error. A sampled run whose stated error is wider than the table's
    tolerance is no answer to compare: the simulation runs again in full."""
    started = time.perf_counter()
    rejected = None
    try:
        result = run(ROOT / sim.workload, sim.arch, params=dict(sim.params), sms=sim.sms, sample="auto",
                     clock=sim.clock, carveout=sim.carveout)
        stated = (result.sampling or {}).get("error_estimate_pct", 0.0)
        if stated > TOLERANCE_PCT:
            rejected = {k: result.sampling[k] for k in SAMPLING_KEPT if k in result.sampling}
            result = run(ROOT / sim.workload, sim.arch, params=dict(sim.params), sms=sim.sms, sample="off",
                         clock=sim.clock, carveout=sim.carveout)
    except Exception as exc:  # every failure is one row's one-line error, not the end of the table
        return {"error": one_line(exc), "wall_s": round(time.perf_counter() - started, 2)}
    sampling = result.sampling or {}
    out = {"metrics": {k: result.metrics[k] for k in KEPT if k in result.metrics},
           "sampling": {k: sampling[k] for k in SAMPLING_KEPT if k in sampling} or None,
           "wall_s": round(time.perf_counter() - started, 2)}
    if rejected is None and isinstance(sampling.get("rejected_sample"), dict):  # gpusim's own --sample auto ran it
        rejected = {k: sampling["rejected_sample"][k] for k in SAMPLING_KEPT if k in sampling["rejected_sample"]}
    if rejected is not None:
        out["rejected_sample"] = rejected
    if result.partial:
        out["error"] = "the simulation stopped early (partial result)"
    if result.warnings:
        out["warnings"] = list(result.warnings)
    return out


def run_sims(sims: list[Sim], jobs: int) -> dict[Sim, dict]:
    """Each distinct simulation once, `jobs` at a time; a line on stderr as each one ends."""
    done: dict[Sim, dict] = {}

    def note(sim: Sim, out: dict) -> None:
        what = out.get("error") or f"{out['wall_s']:.0f} s"
        print(f"  [{len(done)}/{len(sims)}] {Path(sim.workload).stem} {sim.arch}"
              f"{'' if sim.clock == 'boost' else f' at {sim.clock} clock'} "
              f"{' '.join(f'{k}={v}' for k, v in sim.params)}: {what}", file=sys.stderr, flush=True)

    if jobs <= 1 or len(sims) <= 1:
        for sim in sims:
            done[sim] = simulate(sim)
            note(sim, done[sim])
        return done
    with ProcessPoolExecutor(min(jobs, len(sims))) as pool:
        futures = {pool.submit(simulate, sim): sim for sim in sims}
        for future in as_completed(futures):
            sim = futures[future]
            try:
                done[sim] = future.result()
            except Exception as exc:  # a worker that died (memory, signal)
                done[sim] = {"error": one_line(exc), "wall_s": None}
            note(sim, done[sim])
    return done


def simulated_value(row: Row, outs: list[dict]) -> float:
    """The row's metric from its runs' metrics (one run, or the short and the long run of a marginal row)."""
    ms = [o["metrics"] for o in outs]
    sims = row.sims()
    for m in ms:
        if CYCLES not in m or TIME not in m:
            raise ValueError(f"the run reported no {CYCLES} / {TIME}")
    if row.marginal is None:
        seconds = ms[0][TIME]
        if seconds <= 0:
            raise ValueError("the run took no time")
        if row.metric == "time_us":
            return seconds * 1e6
        amount = evaluate(row.formula, row.names(sims[0]))
        return amount / seconds / (1e12 if row.metric == "tflops" else 1e9)
    _, short, long = row.marginal
    if row.metric == "latency_cycles":
        return (ms[1][CYCLES] - ms[0][CYCLES]) / (long - short)
    seconds = ms[1][TIME] - ms[0][TIME]
    if seconds <= 0:
        raise ValueError("the longer run did not take longer")
    amount = evaluate(row.formula, row.names(sims[1])) - evaluate(row.formula, row.names(sims[0]))
    return amount / seconds / (1e12 if row.metric == "tflops" else 1e9)


def evaluate_rows(rows: list[Row], results: dict[Sim, dict]) -> list[dict]:
    records = []
    for row in rows:
        outs = [results[s] for s in row.sims()]
        record = row.record()
        record["runs"] = [{"params": dict(s.params), "sms": s.sms, "clock": s.clock, "carveout": s.carveout, **o}
                          for s, o in zip(row.sims(), outs)]
        failed = next((o["error"] for o in outs if "error" in o), None)
        if failed is None:
            try:
                value = simulated_value(row, outs)
            except (ValueError, ZeroDivisionError, TableError) as exc:
                failed = one_line(exc)
        if failed is not None:
            record.update(simulated=None, ratio=None, error_pct=None, error=failed)
        else:
            ratio = value / row.published
            record.update(simulated=value, ratio=ratio, error_pct=abs(ratio - 1) * 100, error=None)
        records.append(record)
    return records


# --- the record --------------------------------------------------------------------------------------------------

def git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                    if line.startswith("model name")), cpu)
    return f"{platform.system()} {platform.release()} {platform.machine()}, {cpu}, {os.cpu_count()} CPUs, " \
           f"Python {platform.python_version()}"


def cell(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:,.1f} {unit}"


def print_table(records: list[dict]) -> None:
    head = ("id", "arch", "published", "simulated", "ratio")
    lines = [(r["id"], r["arch"], cell(r["published"], r["unit"]),
              cell(r["simulated"], r["unit"]) if r["error"] is None else f"error: {r['error']}",
              f"{r['ratio']:.3f}" if r["ratio"] is not None else "-") for r in records]
    # an error message is as long as it is: it does not widen the column
    widths = [max([len(h)] + [len(line[i]) for line in lines if not line[i].startswith("error: ")])
              for i, h in enumerate(head)]
    fmt = lambda cols: " | ".join(c.ljust(w) if i < 4 else c for i, (c, w) in enumerate(zip(cols, widths)))
    print(fmt(head))
    print("-+-".join("-" * w for w in widths))
    for line in lines:
        print(fmt(line))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", help="comma-separated row ids (default: every row)")
    parser.add_argument("--jobs", type=int, default=1, help="simulations at once (processes; default 1)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON,
                        help=f"the record (default {DEFAULT_JSON.relative_to(ROOT)})")
    parser.add_argument("--table", type=Path, default=TABLE, help="the table of published rows")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")
    args = parser.parse_args(argv)
    try:
        rows, not_simulated = load_rows(args.table)
    except (TableError, OSError, yaml.YAMLError) as exc:
        print(f"published: {args.table}: {one_line(exc) if not isinstance(exc, TableError) else exc}", file=sys.stderr)
        return 2
    if args.rows:
        wanted = [w.strip() for w in args.rows.split(",") if w.strip()]
        known = {r.id for r in rows}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            print(f"published: no row {', '.join(unknown)} in {args.table} (--list shows them)", file=sys.stderr)
            return 2
        rows = [r for r in rows if r.id in set(wanted)]
    if args.list:
        for r in rows:
            print(f"{r.id:28} {r.arch:5} {r.metric:15} {r.published:g} {UNITS[r.metric]}  {r.workload}")
        print(f"{len(rows)} rows; {len(not_simulated)} published numbers not simulated (not_simulated:)")
        return 0
    if args.jobs < 1:
        print("published: --jobs must be at least 1", file=sys.stderr)
        return 2

    started = time.perf_counter()
    sims = list(dict.fromkeys(s for r in sorted(rows, key=lambda r: ORDER.index(r.metric)) for s in r.sims()))
    print(f"{len(rows)} rows, {len(sims)} simulations, {args.jobs} at a time", file=sys.stderr, flush=True)
    records = evaluate_rows(rows, run_sims(sims, args.jobs))
    print_table(records)

    good = [r for r in records if r["error"] is None]
    failed = [r for r in records if r["error"] is not None]
    print(f"{len(records)} rows in {time.perf_counter() - started:.0f} s: {len(good)} simulated, {len(failed)} failed"
          + (f" ({', '.join(r['id'] for r in failed)})" if failed else ""))
    summary = {"rows": len(records), "simulated": len(good), "failed": len(failed),
               "not_simulated": len(not_simulated), "mean_abs_error_pct": None, "worst_pct": None, "worst_row": None}
    if good:
        worst = max(good, key=lambda r: r["error_pct"])
        summary.update(mean_abs_error_pct=sum(r["error_pct"] for r in good) / len(good),
                       worst_pct=worst["error_pct"], worst_row=worst["id"])
        print(f"worst row: {worst['id']} (simulated / published = {worst['ratio']:.3f})")
        print(f"published: mean absolute error {summary['mean_abs_error_pct']:.1f}%, worst {summary['worst_pct']:.1f}%")
    else:
        print("published: mean absolute error -, worst - (no row simulated)")

    status = git("status", "--porcelain", "--untracked-files=no")
    given = list(argv) if argv is not None else sys.argv[1:]
    record = {"command": "python " + shlex.join([str(Path(__file__).resolve().relative_to(ROOT)), *given]),
              "commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status),
              "machine": machine(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "table": os.path.relpath(args.table.resolve(), ROOT), "summary": summary, "rows": records}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record, indent=1) + "\n")
    print(f"record: {args.json}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
