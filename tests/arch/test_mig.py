"""MIG slices (arch/mig.yaml, gpusim.arch.mig): `--arch h100:3g.40gb` is one GPU instance of that profile, with the
profile's SMs and its memory slices' share of L2 and DRAM, and the full part's SM."""

import json

import pytest

from gpusim import ArchError, load_arch
from gpusim.analytic.occupancy import occupancy
from gpusim.api import run
from gpusim.arch import known_archs
from gpusim.arch.mig import MEMORY_SLICES, _structure_table, mig_parts, mig_table, profile_memory_gb

from tests.conftest import ROOT, run_cli

# The profile names of NVIDIA's MIG user guide, "Supported MIG Profiles" (v580): Table 6 (A100-SXM4-40GB, and its
# note's A100-SXM4-80GB names), Table 7 (H100 80GB), Table 8 (H200), Table 9 (B200).
GUIDE = {
    "a100": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "a100-40gb": ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
    "h100": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "h200": ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
    "b200": ["1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"],
}
# SM counts `nvidia-smi mig -lgip` prints on an H100 80GB (the guide gives only fractions).
H100_SMS = {"1g.10gb": 16, "1g.10gb+me": 16, "1g.20gb": 26, "2g.20gb": 32, "3g.40gb": 60, "4g.40gb": 64,
            "7g.80gb": 132}
SLICES = [f"{part}:{name}" for part, names in GUIDE.items() for name in names]


def _base(slice_name):
    part = slice_name.partition(":")[0]
    return load_arch(mig_table()[part].base or part)


@pytest.mark.fast
def test_every_profile_in_the_guides_tables_is_listed():
    """Every profile in the guide's tables for the A100 (40 and 80 GB), H100, H200 and B200 is listed, and no
    other; parts the guide does not list (V100, T4, L40S, B300) have none."""
    assert {part: list(mig_table()[part].profiles) for part in mig_parts()} == GUIDE
    assert {mig_table()[p].base or p for p in mig_parts()} | {"v100", "t4", "l40s", "b300"} == set(known_archs())


@pytest.mark.fast
def test_h100_slice_sms_are_nvidia_smis():
    """An H100 slice has the SMs `nvidia-smi mig -lgip` reports for its profile (3g.40gb: 60, 7g.80gb: all 132)."""
    assert {name: load_arch(f"h100:{name}").sms for name in H100_SMS} == H100_SMS


@pytest.mark.fast
@pytest.mark.parametrize("slice_name", SLICES)
def test_a_slices_memory_is_its_memory_slices_share(slice_name):
    """A MIG slice's DRAM bandwidth, DRAM channels, L2 size, L2 slices and L2 bandwidth are its memory slices'
    share (of 8) of the full part's; its memory is the profile name's GB."""
    spec, full = load_arch(slice_name), _base(slice_name)
    part, _, name = slice_name.partition(":")
    profile = mig_table()[part].profiles[name]
    share = profile.memory_slices / MEMORY_SLICES
    full_bandwidth = mig_table()[part].dram_bandwidth_gbs or full.memory.dram.bandwidth_gbs
    assert spec.memory.dram.bandwidth_gbs == pytest.approx(full_bandwidth * share, rel=1e-12)
    assert spec.memory.dram.channels == full.memory.dram.channels * share
    assert spec.memory.l2.size_bytes == full.memory.l2.size_bytes * share
    assert spec.memory.l2.slices == full.memory.l2.slices * share
    assert spec.memory.l2.bandwidth_bytes_per_clock == full.memory.l2.bandwidth_bytes_per_clock * share
    assert spec.memory.dram.capacity_gb == profile_memory_gb(name)
    # per L2 slice and per DRAM channel the slice runs at the full part's rate
    assert spec.memory.l2.size_bytes // spec.memory.l2.slices == full.memory.l2.size_bytes // full.memory.l2.slices


@pytest.mark.fast
@pytest.mark.parametrize("slice_name", SLICES)
def test_a_slice_gets_whole_gpcs(slice_name):
    """A slice has its profile's SMs, at least one GPC per compute slice and enough of the part's GPCs to hold its
    SMs; everything per SM, the clocks and the tensor rates are the full part's."""
    spec, full = load_arch(slice_name), _base(slice_name)
    part, _, name = slice_name.partition(":")
    profile = mig_table()[part].profiles[name]
    st = spec.structure
    assert spec.sms == profile.sms <= full.sms
    assert profile.compute_slices <= st.gpcs <= full.structure.gpcs
    assert st.gpcs * st.tpcs_per_gpc * st.sms_per_tpc >= spec.sms
    assert (spec.sm, spec.shared_memory, spec.pipelines, spec.clocks) == (full.sm, full.shared_memory,
                                                                          full.pipelines, full.clocks)
    assert spec.name == slice_name and f"MIG {name}" in spec.full_name


@pytest.mark.fast
@pytest.mark.parametrize("part", sorted(GUIDE))
def test_instances_fit_the_slices(part):
    """A profile's maximum instances never need more than the 7 compute slices or the 8 memory slices, and the
    whole-GPU 7g profile holds all 8 memory slices: the full part's L2 and DRAM bandwidth."""
    for name, profile in mig_table()[part].profiles.items():
        assert profile.max_instances * profile.compute_slices <= 7, name
        assert profile.max_instances * profile.memory_slices <= MEMORY_SLICES, name
    full_name = GUIDE[part][-1]
    spec, full = load_arch(f"{part}:{full_name}"), _base(f"{part}:{full_name}")
    assert spec.memory.l2 == full.memory.l2 and spec.memory.dram.channels == full.memory.dram.channels


@pytest.mark.fast
@pytest.mark.parametrize("slice_name", ["h100:1g.10gb", "h100:3g.40gb", "a100-40gb:1g.5gb", "b200:7g.180gb",
                                        "h200:1g.35gb"])
@pytest.mark.parametrize("threads, regs, smem", [(128, 32, 0), (256, 64, 48 * 1024), (1024, 255, 0),
                                                 (96, 40, 100_000)])
def test_occupancy_on_a_slice_is_the_full_parts(slice_name, threads, regs, smem):
    """MIG does not change an SM: occupancy per SM on a slice equals the full part's for any launch."""
    on_slice = occupancy(load_arch(slice_name), threads, regs, smem).to_dict()
    on_full = occupancy(_base(slice_name), threads, regs, smem).to_dict()
    on_slice.pop("arch"), on_full.pop("arch")
    assert on_slice == on_full


@pytest.mark.fast
def test_a_run_on_a_slice_uses_the_slices_sms():
    """A kernel runs on a slice; with more blocks than the slice has SMs it takes more waves (cycles) than on the
    full part, where they all fit at once."""
    params = {"blocks": 40, "threads": 128, "iters": 4}
    on_slice = run(ROOT / "workloads/microbench/fma_peak.yaml", "h100:1g.10gb", params=params, sample="off")
    on_full = run(ROOT / "workloads/microbench/fma_peak.yaml", "h100", params=params, sample="off")
    assert on_slice.arch == "h100:1g.10gb"
    assert on_slice.metrics["smsp__inst_executed.sum"] == on_full.metrics["smsp__inst_executed.sum"]
    assert on_slice.metrics["gpu_sim_cycle"] > on_full.metrics["gpu_sim_cycle"]


@pytest.mark.fast
def test_bad_profile_is_a_one_line_error_listing_the_valid_ones():
    """An unknown profile names the valid ones in one line; so does an unknown part."""
    with pytest.raises(ArchError) as err:
        load_arch("h100:3g.41gb")
    message = str(err.value)
    assert "\n" not in message and "unknown MIG profile '3g.41gb' for h100" in message
    assert all(name in message for name in GUIDE["h100"])
    with pytest.raises(ArchError, match="unknown part 'x100'.*h100"):
        load_arch("x100:1g.10gb")


@pytest.mark.fast
@pytest.mark.parametrize("arch", ["v100", "t4", "l40s", "b300"])
def test_an_arch_without_mig_says_so(arch):
    """V100, T4, L40S and B300 have no MIG profiles: a slice of one is a one-line error saying so."""
    with pytest.raises(ArchError) as err:
        load_arch(f"{arch}:1g.10gb")
    message = str(err.value)
    assert "\n" not in message and f"{arch} has no MIG slices" in message and "h100" in message


def test_cli_errors_are_one_line():
    """On the command line a bad slice is one line on stderr and a non-zero exit, no traceback."""
    for arch in ("h100:3g.41gb", "t4:1g.5gb"):
        p = run_cli("occupancy", "--arch", arch, "--threads", "128", "--regs", "32")
        assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_archs_mig_lists_the_profiles():
    """`gpusim archs --mig --json` lists every profile with its SMs, memory, L2 and DRAM bandwidth; the table says
    which archs have no MIG."""
    p = run_cli("archs", "--mig", "--json")
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert set(rows) == set(SLICES)
    assert rows["h100:3g.40gb"]["sms"] == 60 and rows["h100:3g.40gb"]["dram_bandwidth_gbs"] == 3350 / 2
    assert rows["h100:1g.10gb"]["memory_slices"] == 1 and rows["h100:1g.10gb"]["max_instances"] == 7
    p = run_cli("archs", "--mig")
    assert p.returncode == 0 and "h100:3g.40gb" in p.stdout and "no MIG: b300, l40s, t4, v100" in p.stdout


@pytest.mark.fast
@pytest.mark.parametrize("table, expected", [
    ({"h100": {"product": "x", "profiles": {"2g.20gb": {"compute_slices": 3, "memory_slices": 2, "sms": 32,
                                                         "max_instances": 1}}}}, "expected a name '3g.<GB>gb'"),
    ({"h100": {"product": "x", "profiles": {"1g.10gb": {"compute_slices": 1, "memory_slices": 9, "sms": 16,
                                                         "max_instances": 1}}}}, "memory_slices"),
    ({"h100": {"product": "x", "profile": {}}}, "unknown key 'h100.profile'"),
    ({"z100": {"product": "x", "profiles": {}}}, "base arch 'z100' is not a shipped arch"),
])
def test_a_bad_mig_table_is_a_one_line_error(table, expected):
    """A profile whose name disagrees with its compute slices, a count out of range, a typo'd key or a part with no
    arch file is a one-line ArchError."""
    with pytest.raises(ArchError) as err:
        _structure_table(table, "mig.yaml")
    assert expected in str(err.value) and "\n" not in str(err.value)
