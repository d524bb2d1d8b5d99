"""Run plots (gpusim run --plot DIR, result.plot_*) and the timeline recorder they are drawn from."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpusim.analytic.occupancy import occupancy  # noqa: E402
from gpusim.api import run  # noqa: E402
from gpusim.arch import load_arch  # noqa: E402
from gpusim.report import run_plots  # noqa: E402
from gpusim.report.occupancy_plot import occupancy_curves, plot_occupancy  # noqa: E402
from gpusim.stats.timeline import TimelineRecorder  # noqa: E402
from tests.conftest import ROOT, run_cli  # noqa: E402

WORKLOAD = ROOT / "workloads/microbench/latency_hiding.yaml"
PARAMS = {"blocks": 40, "iters": 4}  # 1.25 waves on 2 H100 SMs (16 blocks each): a tail to see
PNG = b"\x89PNG\r\n\x1a\n"


def _recorded(**recorder):
    rec = TimelineRecorder(**recorder)
    return rec.attach(run(WORKLOAD, "h100", sms=2, params=PARAMS, observer=rec))


@pytest.fixture(scope="module")
def result():
    return _recorded()


def _figure_axes(ax):
    return [a for a in ax.figure.axes]


@pytest.mark.parametrize("name", [name for name, _ in run_plots.PLOTS])
def test_each_plot_names_kernel_and_arch_and_labels_its_axes(result, name):
    """Every plot's title says what it shows, the kernel and the arch; its axes are labelled and it has a legend."""
    ax = dict(run_plots.PLOTS)[name](result)
    try:
        title = ax.get_title()
        assert "latency_hiding" in title and "NVIDIA H100" in title
        axes = _figure_axes(ax)
        assert ax.get_ylabel()
        assert any(a.get_xlabel() for a in axes)
        assert all(a.get_ylabel() for a in axes if a.get_visible() and a.has_data())
        assert any(a.get_legend() is not None for a in axes)
    finally:
        plt.close(ax.figure)


def test_write_plots_makes_six_pngs_over_5kb(result, tmp_path):
    """write_plots writes one valid PNG of more than 5 KB per plot and names each by kernel, arch and plot."""
    paths, skipped = run_plots.write_plots(result, tmp_path)
    assert skipped == []
    assert [p.name for p in paths] == [f"run_latency_hiding_h100_{n}.png" for n in
                                       ("warp_states", "timeline_sm0", "occupancy", "blocks", "memory", "roofline")]
    for path in paths:
        data = path.read_bytes()
        assert data[:8] == PNG and len(data) > 5000, path.name


def test_recorder_sums_match_the_run_counters(result):
    """Summed over buckets, the recorder's issued, eligible and active warps equal the run's own counters."""
    tl, m = result.timeline, result.metrics
    widths = tl.bucket_widths
    assert tl.cycles == m["gpu_sim_cycle"]
    assert widths.sum() == tl.cycles
    assert tl.issued.sum() == m["smsp__inst_executed.sum"]
    eligible = m["smsp__pcsamp_warps_issue_stalled_not_selected"] + m["smsp__inst_executed.sum"]
    assert (tl.eligible * widths).sum() == pytest.approx(eligible)
    active = (m["sm__warps_active.avg.pct_of_peak_sustained_active"] / 100 * m["sm__cycles_active.avg"]
              * m["launch__sm_count"] * tl.spec.sm.max_warps)
    assert (tl.active * widths).sum() == pytest.approx(active)
    assert tl.active.max() <= tl.theoretical_warps


def test_blocks_placed_once_each_on_simulated_sms(result):
    """Every block of the grid is placed exactly once, on a simulated SM, and retires after it starts."""
    tl = result.timeline
    blocks = tl.blocks
    assert len(blocks) == tl.nblocks == result.metrics["launch__grid_size"] and tl.blocks_dropped == 0
    assert sorted(blocks[:, 0].tolist()) == list(range(tl.nblocks))
    assert set(blocks[:, 1].tolist()) <= set(range(tl.sms))
    assert (blocks[:, 3] > blocks[:, 2]).all() and blocks[:, 3].max() == tl.cycles
    lanes = run_plots.block_lanes(blocks)
    assert lanes.max() < tl.blocks_per_sm  # no more blocks side by side than can be resident


def test_memory_samples_end_at_the_run_totals(result):
    """The memory counters' last sample equals the run's totals; DRAM bytes never decrease."""
    mem, m = result.timeline.memory, result.metrics
    assert mem["l1_sectors"][-1] == m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
    assert mem["l2_sectors"][-1] == m["lts__t_sectors.sum"]
    assert mem["dram_bytes"][-1] == m["dram__bytes.sum"]
    assert (np.diff(mem["cycle"]) > 0).all() and (np.diff(mem["dram_bytes"]) >= 0).all()


def test_window_records_one_sm_at_cycle_resolution(result):
    """The warp-slot record holds the chosen SM's slots inside the window only; a scheduler issues at most once
    a cycle, and only its own slots (slot % sub-partitions)."""
    tl = result.timeline
    start, end = tl.window
    sub = tl.spec.sm.sub_partitions
    assert (tl.slot_states[:, 2] >= start).all() and (tl.slot_states[:, 3] <= end).all()
    assert ((tl.issues[:, 0] >= start) & (tl.issues[:, 0] < end)).all()
    assert (tl.issues[:, 2] % sub == tl.issues[:, 1]).all()
    assert len({(c, sp) for c, sp, _ in tl.issues.tolist()}) == len(tl.issues)
    image, order = run_plots.slot_raster(tl)
    assert image.shape == (tl.spec.sm.max_warps, end - start) and sorted(order) == list(range(image.shape[0]))


def test_coarse_buckets_stay_bounded_and_exact():
    """With few buckets the widths grow (pairs merge) and the sums are unchanged; the window stays its size."""
    fine, coarse = _recorded().timeline, _recorded(buckets=8, window_start=100, window_cycles=50).timeline
    assert coarse.active.shape[1] <= 8 and coarse.bucket_cycles > fine.bucket_cycles
    assert coarse.issued.sum() == fine.issued.sum()
    assert (coarse.active * coarse.bucket_widths).sum() == pytest.approx((fine.active * fine.bucket_widths).sum())
    assert (coarse.eligible * coarse.bucket_widths).sum() == pytest.approx(
        (fine.eligible * fine.bucket_widths).sum())
    assert len(coarse.memory["cycle"]) <= 8 + 2 and coarse.memory["dram_bytes"][-1] == fine.memory["dram_bytes"][-1]
    assert coarse.window == (100, 150) and ((coarse.issues[:, 0] >= 100) & (coarse.issues[:, 0] < 150)).all()


def test_same_run_same_recorder_data(result):
    """Recording the same run twice gives the same numbers."""
    assert _recorded().timeline.to_dict() == result.timeline.to_dict()


def test_plot_functions_return_axes(result):
    """Each plot of a run draws on the Axes given and returns it."""
    for name in ("plot_warp_states", "plot_timeline", "plot_occupancy", "plot_blocks", "plot_memory",
                 "plot_roofline"):
        fig, ax = plt.subplots()
        assert getattr(run_plots, name)(result, ax=ax) is ax
        plt.close(fig)


def test_time_plots_need_a_timeline(result):
    """Without a recorded timeline the time plots say how to get one; the warp states and roofline need none."""
    import attrs

    from gpusim.errors import GpusimError

    bare = attrs.evolve(result, timeline=None)
    with pytest.raises(GpusimError, match="TimelineRecorder"):
        run_plots.plot_occupancy(bare)
    plt.close(run_plots.plot_roofline(bare).figure)


def test_roofline_point_is_under_its_roofs(result):
    """The run's point at each level lies under that level's bandwidth roof and the highest compute roof."""
    roof = run_plots.roofline_points(result, load_arch("h100"))
    assert set(roof["points"]) == {"DRAM", "L2", "L1/shared (L1TEX data stage)"}
    top = max(roof["compute"].values())
    for level, (intensity, flops) in roof["points"].items():
        assert flops <= min(roof["bandwidth"][level] * intensity, top) * 1.0001
    dram = roof["points"]["DRAM"][0]
    assert dram == pytest.approx(result.metrics["gpusim__arithmetic_intensity_flop_per_dram_byte"])


def test_fixed_memory_leaves_out_the_memory_plot(tmp_path):
    """With --memory fixed there is no hierarchy: the memory plot is left out with a line saying why."""
    rec = TimelineRecorder()
    result = rec.attach(run(WORKLOAD, "h100", sms=1, params=PARAMS, observer=rec, memory="fixed"))
    paths, skipped = run_plots.write_plots(result, tmp_path)
    assert len(paths) == 4 and not any("memory" in p.name or "roofline" in p.name for p in paths)
    assert len(skipped) == 2 and "memory" in skipped[0]


def test_a_command_list_plots_its_first_kernel(tmp_path):
    """A kernelslist.g's plots show its first kernel (the one the recorder hears) and say so in their titles."""
    from tests.trace.test_trace import _chain, write_trace

    write_trace(tmp_path / "kernel-1.traceg", [_chain(20)] * 4)
    write_trace(tmp_path / "kernel-2.traceg", [_chain(30)] * 4)
    (tmp_path / "kernelslist.g").write_text("kernel-1.traceg\nkernel-2.traceg\n")
    rec = TimelineRecorder()
    result = rec.attach(run(tmp_path / "kernelslist.g", "h100", sms=1, observer=rec))
    tl = result.timeline
    assert tl.kernels_ignored == 1 and tl.cycles == result.kernels[0]["metrics"]["gpu_sim_cycle"]
    assert tl.issued.sum() == result.kernels[0]["metrics"]["smsp__inst_executed.sum"]
    paths, skipped = run_plots.write_plots(result, tmp_path / "plots")
    assert len(paths) == 6 and skipped == []
    ax = run_plots.plot_roofline(result)
    assert "(kernel 1 of 2 in kernelslist.g)" in ax.get_title()
    plt.close(ax.figure)


def test_cli_plot_acceptance(tmp_path):
    """`gpusim run latency_hiding --arch h100 --sms 2 --plot DIR` writes at least five PNGs over 5 KB and prints
    their paths."""
    proc = run_cli("run", str(WORKLOAD), "--arch", "h100", "--sms", "2", "--plot", str(tmp_path), "--quiet")
    assert proc.returncode == 0, proc.stderr
    pngs = sorted(tmp_path.glob("*.png"))
    assert len(pngs) >= 5 and all(p.stat().st_size > 5000 and p.read_bytes()[:8] == PNG for p in pngs)
    assert sorted(str(p) for p in pngs) == sorted(proc.stdout.strip().splitlines()[-len(pngs):])


@pytest.mark.parametrize("args, expected", [
    (["--plot-sm", "1"], "--plot-sm N: applies with --plot DIR only"),
    (["--plot", "DIR", "--plot-sm", "2"], "--plot-sm 2: the run simulates 2 SMs: expected 0 to 1"),
    (["--plot", "DIR", "--plot-sm", "-1"], "argument --plot-sm: expected an integer >= 0"),
    (["--plot", "DIR", "--arch", "a100"], "--plot, --trace and --per-inst show one run"),
])
def test_cli_plot_errors_are_one_line(tmp_path, args, expected):
    """A bad --plot / --plot-sm is a one-line error naming the flag."""
    args = [str(tmp_path) if a == "DIR" else a for a in args]
    arch = "h100" if "--arch" not in args else "h100," + args.pop(args.index("--arch") + 1)
    args = [a for a in args if a != "--arch"]
    proc = run_cli("run", str(WORKLOAD), "--arch", arch, "--sms", "2", "--set", "blocks=4", "--set", "iters=1",
                   "--quiet", *args)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and expected in proc.stderr


# --- the occupancy calculator's graphs ------------------------------------------------------------------------
def test_occupancy_graphs_state_fixed_parameters_kib_and_limiters(tmp_path):
    """Each calculator graph's title names the two parameters held fixed; shared memory is in KiB; each point's
    limiter is one the calculator reports there; the fourth PNG holds all three graphs."""
    spec = load_arch("a100")
    r = occupancy(spec, 128, 64, 48 * 1024, 50)
    curves = occupancy_curves(spec, r)
    assert "KiB" in curves["shared_memory"].xlabel and curves["shared_memory"].current == 48
    assert curves["block_size"].fixed == "64 regs/thread, 48 KiB shared/block, carveout 50%"
    for x, limiters in zip(curves["registers"].xs, curves["registers"].limiters):
        assert limiters == occupancy(spec, 128, x, 48 * 1024, 50).limiters
    paths = plot_occupancy(spec, r, tmp_path)
    assert [p.name.rsplit("_", 1)[-1] for p in paths] == ["size.png", "registers.png", "memory.png", "all.png"]
    assert all(p.read_bytes()[:8] == PNG and p.stat().st_size > 5000 for p in paths)
    fig, ax = plt.subplots()
    from gpusim.report.occupancy_plot import draw_curve

    draw_curve(ax, spec, r, curves["shared_memory"])
    assert "128 threads/block, 64 regs/thread" in ax.get_title() and ax.get_xlabel().endswith("(KiB)")
    assert any(t.get_text().startswith("limited by") for t in ax.get_legend().get_texts())
    plt.close(fig)
