"""Compare `gpusim llm` with published LLM inference measurements (validation/inference_published.yaml).

    python validation/inference.py [--rows ID,...] [--json PATH] [--list]

Each row is estimated as `gpusim llm --model M --arch A --tp N --batch B --prompt P --generate G` would (the library
call gpusim.llm.estimate, kernel results from the kernel cache where it holds them) and converted to the row's
metric: decode_tokens_per_s = 1 / time per output token; ttft_ms = time to first token; e2e_ms = time to first token
+ (generate - 1) x time per output token. The table printed is `id | arch | published | simulated | ratio`, then the
mean of |simulated / published - 1| over the rows run. The JSON record (--json, default
validation/results/inference.json) holds the command, the commit, the machine, the date, and for every row its
equivalent `gpusim llm` command, the estimate's latencies and the wall time. Large errors are the output, not a
failure: the exit status is 0 unless a row failed (1, its one-line error in the table) or the table is malformed (2).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

from gpusim.errors import GpusimError
from gpusim.llm import estimate

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TABLE = HERE / "inference_published.yaml"
DEFAULT_JSON = HERE / "results" / "inference.json"
METRICS = {"decode_tokens_per_s": "tokens/s", "ttft_ms": "ms", "e2e_ms": "ms"}
FIELDS = ("id", "model", "arch", "tp", "batch", "prompt", "generate", "metric", "value", "source")


def load_table(path: Path = TABLE) -> list[dict]:
    rows = yaml.safe_load(path.read_text())["rows"]
    for row in rows:
        missing = [f for f in FIELDS if f not in row]
        if missing or row["metric"] not in METRICS:
            raise SystemExit(f"{path.name}: row {row.get('id', '?')}: "
                             f"{'missing ' + ', '.join(missing) if missing else 'unknown metric ' + row['metric']}")
    return rows


def command(row: dict) -> str:
    return (f"gpusim llm --model {row['model']} --arch {row['arch']} --tp {row['tp']} --batch {row['batch']} "
            f"--prompt {row['prompt']} --generate {row['generate']}")


def simulated_value(row: dict, result) -> float:
    if row["metric"] == "decode_tokens_per_s":
        return 1.0 / result.time_per_output_token_s
    if row["metric"] == "ttft_ms":
        return result.time_to_first_token_s * 1e3
    return (result.time_to_first_token_s + (row["generate"] - 1) * result.time_per_output_token_s) * 1e3


def run_row(row: dict) -> dict:
    start = time.time()
    out = {"id": row["id"], "arch": row["arch"], "metric": row["metric"], "published": row["value"],
           "command": command(row), "source": row["source"]}
    try:
        result = estimate(str(ROOT / row["model"]) if "/" in row["model"] else row["model"], row["arch"],
                          batch=row["batch"], prompt=row["prompt"], generate=row["generate"], tp=row["tp"])
    except GpusimError as exc:
        return {**out, "error": str(exc), "wall_s": round(time.time() - start, 1)}
    value = simulated_value(row, result)
    return {**out, "simulated": value, "ratio": value / row["value"],
            "time_to_first_token_s": result.time_to_first_token_s,
            "time_per_output_token_s": result.time_per_output_token_s, "decode_floor_s": result.decode_floor_s,
            "kernels_simulated": result.simulated, "wall_s": round(time.time() - start, 1)}


def git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    return (f"{platform.system()} {platform.release()} {platform.machine()}, {cpu}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default=None, help="only these row ids (comma-separated)")
    parser.add_argument("--json", default=str(DEFAULT_JSON), help="the record to write")
    parser.add_argument("--list", action="store_true", help="list the rows and their commands, run nothing")
    args = parser.parse_args(argv)
    rows = load_table()
    if args.rows:
        wanted = args.rows.split(",")
        unknown = [w for w in wanted if w not in {r["id"] for r in rows}]
        if unknown:
            print(f"--rows: unknown id {unknown[0]}", file=sys.stderr)
            return 2
        rows = [r for r in rows if r["id"] in wanted]
    if args.list:
        for row in rows:
            print(f"{row['id']:32s} {command(row)}")
        return 0
    results = []
    print(f"{'id':32s} {'arch':5s} {'published':>12s} {'simulated':>12s} {'ratio':>6s}")
    for row in rows:
        r = run_row(row)
        results.append(r)
        unit = METRICS[row["metric"]]
        if "error" in r:
            print(f"{r['id']:32s} {r['arch']:5s} {row['value']:>12,.2f} error: {r['error']}")
        else:
            print(f"{r['id']:32s} {r['arch']:5s} {row['value']:>12,.2f} {r['simulated']:>12,.2f} "
                  f"{r['ratio']:>6.2f}  {unit} ({r['wall_s']:.0f} s)", flush=True)
    done = [r for r in results if "ratio" in r]
    mae = 100 * sum(abs(r["ratio"] - 1) for r in done) / len(done) if done else None
    if mae is not None:
        print(f"mean absolute error over {len(done)} rows: {mae:.1f}%")
    status = git("status", "--porcelain")
    given = argv if argv is not None else sys.argv[1:]
    record = {"command": shlex.join(["python", "validation/inference.py", *given]),
              "commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status),
              "machine": machine(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "table": "validation/inference_published.yaml",
              "summary": {"rows": len(results), "failed": len(results) - len(done), "mean_abs_error_pct": mae},
              "rows": results}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    return 1 if len(done) < len(results) else 0


if __name__ == "__main__":
    sys.exit(main())
