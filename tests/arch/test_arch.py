"""Architecture files: every shipped part loads, derived peaks match NVIDIA's figures, bad files are one-line errors."""

import re

import attrs
import pytest
import yaml

from gpusim import ArchError, known_archs, load_arch
from gpusim.arch import arch_dir, parse_arch
from gpusim.arch.spec import ArchSpec, describe_fields

from tests.conftest import ARCH_NAMES, run_cli

# NVIDIA's published figures (../shared/arch-facts.md): FP32 TFLOPS, dense FP16 tensor TFLOPS, DRAM GB/s.
PUBLISHED = {
    "v100": (15.7, 125, 900), "t4": (8.1, 65, 320), "a100": (19.5, 312, 2039), "l40s": (91.6, 362, 864),
    "h100": (66.9, 989.4, 3350), "h200": (66.9, 989.4, 4800), "b200": (None, 2250, 8000), "b300": (None, None, 8000),
}


@pytest.mark.fast
def test_all_eight_parts_ship():
    assert sorted(known_archs()) == sorted(ARCH_NAMES)


@pytest.mark.fast
@pytest.mark.parametrize("name", ARCH_NAMES)
def test_derived_peaks_within_3_percent_of_published(name):
    spec = load_arch(name)
    fp32, tensor, dram = PUBLISHED[name]
    if fp32 is not None:
        assert spec.peak_fp32_tflops == pytest.approx(fp32, rel=0.03)
    if tensor is not None:
        assert spec.peak_fp16_tensor_tflops == pytest.approx(tensor, rel=0.03)
    assert spec.memory.dram.bandwidth_gbs == pytest.approx(dram, rel=0.03)


@pytest.mark.fast
def test_h100_peaks_use_two_clocks():
    """H100: FP32 is quoted at 1980 MHz, tensor at 1830 MHz; the file carries both."""
    spec = load_arch("h100")
    assert (spec.clocks.core_mhz, spec.clocks.tensor_mhz) == (1980, 1830)
    assert spec.peak_fp32_tflops == pytest.approx(128 * 132 * 2 * 1.980e-3, rel=1e-9)
    assert spec.peak_fp16_tensor_tflops == pytest.approx(4096 * 132 * 1.830e-3, rel=1e-9)


@pytest.mark.fast
@pytest.mark.parametrize("name", ARCH_NAMES)
def test_every_number_has_a_source_comment(name):
    """Every line that sets a number in arch/*.yaml carries a comment saying where it comes from."""
    for lineno, line in enumerate((arch_dir() / f"{name}.yaml").read_text().splitlines(), 1):
        if re.match(r"^\s*[a-z_0-9]+:\s*[\d\[{\"]", line):
            assert "#" in line, f"{name}.yaml:{lineno} has no source comment: {line.strip()}"


@pytest.mark.fast
def test_every_spec_field_is_described():
    def walk(cls):
        for a in attrs.fields(cls):
            assert a.metadata.get("doc"), f"{cls.__name__}.{a.name} has no description"
            if attrs.has(a.type if isinstance(a.type, type) else object):
                walk(a.type)
    walk(ArchSpec)
    assert ("per_sm_bytes", "bytes", "largest shared-memory carveout per SM") in [
        d for d in describe_fields(ArchSpec.__attrs_attrs__.shared_memory.type)]


@pytest.mark.fast
def test_spec_is_frozen_and_evolvable():
    spec = load_arch("h100")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        spec.name = "x"
    smaller = attrs.evolve(spec, structure=attrs.evolve(spec.structure, enabled_sms=16))
    assert smaller.sms == 16 and spec.sms == 132


def _h100_data():
    return yaml.safe_load((arch_dir() / "h100.yaml").read_text())


def _error(data) -> str:
    with pytest.raises(ArchError) as info:
        parse_arch(data, "custom.yaml")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("custom.yaml: ")
    return msg


@pytest.mark.fast
def test_unknown_key_is_named():
    data = _h100_data()
    data["sm"]["max_wraps"] = 64
    assert "unknown key 'sm.max_wraps'" in _error(data)


@pytest.mark.fast
def test_missing_key_is_named():
    data = _h100_data()
    del data["memory"]["l2"]["hit_latency"]
    assert "missing key 'memory.l2.hit_latency'" in _error(data)


@pytest.mark.fast
def test_wrong_type_is_named():
    data = _h100_data()
    data["sm"]["max_warps"] = "sixty-four"
    msg = _error(data)
    assert "'sm.max_warps'" in msg and "expected an integer" in msg


@pytest.mark.fast
def test_fractional_count_is_not_silently_truncated():
    data = _h100_data()
    data["sm"]["max_blocks"] = 31.5
    assert "'sm.max_blocks'" in _error(data)


@pytest.mark.fast
def test_non_positive_count_is_named():
    data = _h100_data()
    data["structure"]["enabled_sms"] = 0
    msg = _error(data)
    assert "'structure.enabled_sms'" in msg and "positive" in msg


@pytest.mark.fast
def test_inconsistent_values_are_named():
    data = _h100_data()
    data["shared_memory"]["carveout_steps_kb"] = [0, 8, 200, 100]
    assert "carveout_steps_kb" in _error(data)
    data = _h100_data()
    data["structure"]["enabled_sms"] = 500
    assert "enabled_sms" in _error(data)


@pytest.mark.fast
def test_unknown_arch_lists_the_known_ones():
    with pytest.raises(ArchError) as info:
        load_arch("h999")
    assert all(name in str(info.value) for name in ARCH_NAMES)


@pytest.mark.fast
def test_custom_arch_file_loads_by_path(tmp_path):
    data = _h100_data()
    data["name"] = "h100_half"
    data["structure"]["enabled_sms"] = 66
    path = tmp_path / "h100_half.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = load_arch(str(path))
    assert spec.sms == 66 and spec.peak_fp32_tflops == pytest.approx(66.9 / 2, rel=0.01)


@pytest.mark.parametrize("content, expected", [
    ("name: [unclosed\n", "not valid YAML"),
    ("- just\n- a list\n", "expected a mapping"),
])
def test_broken_yaml_is_one_line_error_through_cli(tmp_path, content, expected):
    path = tmp_path / "broken.yaml"
    path.write_text(content)
    proc = run_cli("occupancy", "--arch", str(path), "--threads", "256", "--regs", "32")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "broken.yaml" in proc.stderr and expected in proc.stderr


def test_typo_arch_through_cli(tmp_path):
    text = (arch_dir() / "h100.yaml").read_text().replace("\nsm:\n", "\nsm_typo:\n", 1)
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    proc = run_cli("occupancy", "--arch", str(path), "--threads", "256", "--regs", "32")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "unknown key 'sm_typo'" in proc.stderr and "missing key 'sm'" in proc.stderr


def test_archs_json_lists_all_with_documented_keys():
    import json

    proc = run_cli("archs", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert sorted(r["name"] for r in rows) == sorted(ARCH_NAMES)
    keys = {"name", "compute_capability", "sms", "peak_fp32_tflops", "peak_fp16_tensor_tflops",
            "dram_bandwidth_gbs", "l2_bytes"}
    assert all(keys <= set(r) for r in rows)
    h100 = next(r for r in rows if r["name"] == "h100")
    assert (h100["sms"], h100["l2_bytes"], h100["compute_capability"]) == (132, 50 * 2**20, "9.0")


def test_archs_fields_state_every_number_range_and_match_the_files():
    """`archs --fields`: every leaf field of an arch file, dotted; every numeric one states its range."""
    import json

    import yaml

    proc = run_cli("archs", "--fields", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["field"]: r for r in json.loads(proc.stdout)}
    assert rows["memory.l2.size_bytes"]["range"] and rows["structure.gpcs"]["range"].endswith("up to 64")
    assert all(r["range"] and r["description"] for name, r in rows.items()
               if name != "shared_memory.barrier_limit_enforced"), [n for n, r in rows.items() if not r["range"]]

    def leaves(data, prefix=""):
        for key, value in data.items():
            if isinstance(value, dict):
                yield from leaves(value, f"{prefix}{key}.")
            else:
                yield prefix + key

    data = yaml.safe_load((arch_dir() / "h100.yaml").read_text())
    data.pop("sources", None)
    assert set(leaves(data)) <= set(rows)  # the table names the keys the files use


def test_archs_table_prints_every_part():
    proc = run_cli("archs")
    assert proc.returncode == 0
    assert all(name in proc.stdout for name in ARCH_NAMES) and "989.4" in proc.stdout


@pytest.mark.fast
@pytest.mark.parametrize("value, expected", [
    (0, "positive"), (-683, "positive"), ("fast", "expected an integer"), (682.5, "expected an integer"),
])
def test_bad_warp_mma_rate_is_named(value, expected):
    data = _h100_data()
    data["pipelines"]["tensor"]["warp_mma_flops_per_clock"] = value
    msg = _error(data)
    assert "warp_mma_flops_per_clock" in msg and expected in msg, msg


@pytest.mark.fast
@pytest.mark.parametrize("level, line, sector", [("l1", 128, 256), ("l2", 128, 4), ("l1", 1024, 32)])
def test_a_line_holds_one_to_sixteen_sectors(level, line, sector):
    data = _h100_data()
    data["memory"][level].update(line_bytes=line, sector_bytes=sector)
    msg = _error(data)
    assert f"'memory.{level}.line_bytes': expected 1 to 16 sectors of {sector} bytes, got {line}" in msg, msg


@pytest.mark.fast
def test_warp_mma_rate_defaults_to_the_dense_peak():
    data = _h100_data()
    del data["pipelines"]["tensor"]["warp_mma_flops_per_clock"]
    tensor = parse_arch(data, "custom.yaml").pipelines.tensor
    assert tensor.warp_mma_flops_per_clock is None and tensor.warp_mma_rate == tensor.dense_fp16_flops_per_clock


@pytest.mark.fast
@pytest.mark.parametrize("key, value, expected", [
    ("columns", -5, "expected a power of two from 1 to 65,536, got -5"),
    ("columns", 500, "expected a power of two"),
    ("mma_tile_m", "wide", "expected an integer"),
])
def test_bad_tensor_memory_fields_are_named(key, value, expected):
    """The B200's tensor memory (tcgen05): a size that is not a power of two or not a number is a one-line error
    naming the field; a key the section does not have is named as a typo."""
    data = yaml.safe_load((arch_dir() / "b200.yaml").read_text())
    data["pipelines"]["tensor"]["tensor_memory"][key] = value
    message = _error(data)
    assert f"'pipelines.tensor.tensor_memory.{key}'" in message and expected in message
    data = yaml.safe_load((arch_dir() / "b200.yaml").read_text())
    data["pipelines"]["tensor"]["tensor_memory"]["mma_tile_mm"] = 128
    assert "unknown key 'pipelines.tensor.tensor_memory.mma_tile_mm'" in _error(data)


@pytest.mark.fast
@pytest.mark.parametrize("value, expected", [
    (-1, "expected an integer from 0 to"),
    ("soon", "expected an integer"),
])
def test_a_bad_block_retire_cycles_is_named(value, expected):
    """frontend.block_retire_cycles: 0 (a retired block's slot refilled at once) or more cycles; anything else is a
    one-line error naming the field."""
    data = yaml.safe_load((arch_dir() / "h100.yaml").read_text())
    data["frontend"]["block_retire_cycles"] = value
    message = _error(data)
    assert "'frontend.block_retire_cycles'" in message and expected in message
