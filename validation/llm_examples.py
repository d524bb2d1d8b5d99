"""Run the `gpusim llm` estimates the LLM inference tutorial (docs/tutorials/llm-inference.md) shows and keep them.

    python validation/llm_examples.py [--only ID,...] [--json PATH] [--list]

A cold estimate of an 8-billion-parameter model simulates a few dozen kernels (minutes each on a 2-core machine),
so the tutorial renders its numbers from this record (validation/results/llm-examples.json) instead of running them:
every example's command, the estimate's latencies, memory and kernels, the wall time, and the command, commit,
machine and date of the run. `--only` reruns some examples and keeps the others' stored results.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from gpusim.llm import estimate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inference import git, machine  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_JSON = HERE / "results" / "llm-examples.json"

# (id, model, arch, batch, prompt, generate, tp)
EXAMPLES = [
    ("h100-b1", "llama-3-8b", "h100", 1, 512, 128, 1),
    ("b200-b1", "llama-3-8b", "b200", 1, 512, 128, 1),
    ("h100-prefill-8192", "llama-3-8b", "h100", 1, 8192, 1, 1),
    ("h100-p256-b1", "llama-3-8b", "h100", 1, 256, 256, 1),
    ("h100-p256-b8", "llama-3-8b", "h100", 8, 256, 256, 1),
    ("h100-p256-b32", "llama-3-8b", "h100", 32, 256, 256, 1),
    ("h100-70b-tp8", "llama-3-70b", "h100", 1, 512, 128, 8),
]


def command(example: tuple) -> str:
    _, model, arch, batch, prompt, generate, tp = example
    return (f"gpusim llm --model {model} --arch {arch} --batch {batch} --prompt {prompt} --generate {generate}"
            + (f" --tp {tp}" if tp > 1 else ""))


def run(example: tuple) -> dict:
    name, model, arch, batch, prompt, generate, tp = example
    start = time.time()
    result = estimate(model, arch, batch=batch, prompt=prompt, generate=generate, tp=tp)
    record = result.to_dict()
    keep = ("time_to_first_token_s", "time_per_output_token_s", "tokens_per_s", "decode_floor_s",
            "prefill_weight_flops", "weight_bytes", "weight_bytes_per_gpu", "kv_cache_bytes", "fits_in_memory",
            "max_batch", "allreduce_s", "prefill_allreduce_s", "memory_per_gpu", "kernels")
    return {"id": name, "command": command(example), "model": model, "layers": result.model.layers, "arch": arch,
            "batch": batch, "prompt": prompt, "generate": generate, "tp": tp, **{k: record[k] for k in keep},
            "kernels_simulated": result.simulated, "wall_s": round(time.time() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=None, help="only these example ids (comma-separated)")
    parser.add_argument("--json", default=str(DEFAULT_JSON), help="the record to write")
    parser.add_argument("--list", action="store_true", help="list the examples' commands, run nothing")
    args = parser.parse_args(argv)
    chosen = [e for e in EXAMPLES if args.only is None or e[0] in args.only.split(",")]
    if args.list:
        for e in chosen:
            print(f"{e[0]:20s} {command(e)}")
        return 0
    path = Path(args.json)
    old = json.loads(path.read_text()) if path.exists() else {"examples": []}
    results = {r["id"]: r for r in old["examples"]}
    for example in chosen:
        r = run(example)
        results[r["id"]] = r
        print(f"{r['id']:20s} TTFT {r['time_to_first_token_s'] * 1e3:9.3f} ms  TPOT "
              f"{r['time_per_output_token_s'] * 1e3:8.3f} ms  ({r['wall_s']:.0f} s)", flush=True)
    status = git("status", "--porcelain")
    record = {"command": shlex.join(["python", "validation/llm_examples.py",
                                     *(argv if argv is not None else sys.argv[1:])]),
              "commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status),
              "machine": machine(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "examples": [results[e[0]] for e in EXAMPLES if e[0] in results]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
