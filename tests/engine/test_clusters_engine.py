"""Thread block clusters in the engine: a cluster's blocks start together on distinct SMs of one GPC; a cluster
that fits no GPC waits for room; the engine holds as many clusters at once as cudaOccupancyMaxActiveClusters
says (gpusim.analytic.clusters); parts and launches that cannot run a cluster are a one-line error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpusim.analytic.clusters import max_active_clusters
from gpusim.api import run
from gpusim.engine.dispatcher import cluster_members
from gpusim.stats.observer import Observer
from gpusim.errors import GpusimError

KERNEL = """kernel: clustered
params: {C: 2, NB: 64, SMEM: 1024}
buffers:
  g: {bytes: NB * 128 * 4}
  s: {space: shared, bytes: SMEM}
launch:
  grid: [NB]
  block: [128]
  registers_per_thread: 32
  cluster: [C]
program:
  - loop: 8
    body:
      - {op: LDG.E, dst: r1, src: [r0], addr: "g + gtid * 4"}
      - {op: FFMA, dst: r2, src: [r1, r2]}
"""


class Placement(Observer):
    def __init__(self):
        self.starts, self.ends = {}, {}

    def block_started(self, sm, block, now):
        self.starts[block] = (now, sm.index, sm.name)

    def block_retired(self, sm, block, now):
        self.ends[block] = now


@pytest.fixture()
def kernel(tmp_path):
    path = tmp_path / "clustered.yaml"
    path.write_text(KERNEL)
    return path


def gpc(name: str) -> str:
    return name.split(".tpc")[0]


def test_cluster_members_are_whole_clusters_in_launch_order():
    """A 4 x 2 grid in clusters of 2 x 2: blocks (x fastest) 0,1,4,5 then 2,3,6,7."""
    assert cluster_members((4, 2, 1), (2, 2, 1)) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert cluster_members((6, 1, 1), (3, 1, 1)) == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize("size", [2, 4, 8])
def test_a_clusters_blocks_start_together_on_distinct_sms_of_one_gpc(kernel, size):
    seen = Placement()
    run(kernel, "h100", params={"C": size, "NB": 132 * 2}, observer=seen)
    assert len(seen.starts) == 132 * 2
    for members in cluster_members((132 * 2, 1, 1), (size, 1, 1)):
        starts = [seen.starts[b] for b in members]
        assert len({t for t, _, _ in starts}) == 1, "a cluster's blocks start at the same cycle"
        assert len({sm for _, sm, _ in starts}) == size, "on distinct SMs"
        assert len({gpc(name) for _, _, name in starts}) == 1, "of one GPC"


def test_clusters_that_do_not_fit_wait_and_the_engine_holds_what_the_calculator_says(kernel):
    """One block per SM (200 KiB of shared memory each), clusters of 16 on h100: the calculator's
    max_active_clusters (8: one per GPC of 16 or 18 SMs) is the most clusters the engine has resident at once,
    and the rest wait for a GPC to empty."""
    smem = 200 * 1024
    expected = max_active_clusters("h100", 128, 32, (16, 1, 1), smem_per_block=smem, non_portable=True)
    seen = Placement()
    result = run(kernel, "h100", params={"C": 16, "NB": 16 * 20, "SMEM": smem}, observer=seen)
    events = sorted([(t, +1) for t, _, _ in seen.starts.values()] + [(t, -1) for t in seen.ends.values()],
                    key=lambda e: (e[0], e[1]))
    resident = most = 0
    for _, step in events:
        resident += step
        most = max(most, resident)
    assert most == expected * 16
    assert result.metrics["gpusim__cluster_wait_cycles"] > 0


def test_parts_and_launches_that_cannot_run_a_cluster_are_one_line(kernel):
    with pytest.raises(GpusimError, match="need compute capability 9.0"):
        run(kernel, "a100", params={"C": 2})
    with pytest.raises(GpusimError, match="the largest GPC simulated has 2"):
        run(kernel, "h100", params={"C": 8}, sms=8)
    with pytest.raises(GpusimError, match="not a multiple of cluster.x"):
        run(kernel, "h100", params={"C": 3})
    with pytest.raises(GpusimError, match="at most 16"):
        run(kernel, "h100", params={"C": 32, "NB": 64})
    proc = subprocess.run([sys.executable, "-m", "gpusim", "run", str(kernel), "--arch", "a100"],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
