"""Hostile YAML and architecture files: every input ends in a result or a one-line GpusimError that
names the file (and line or key), within bounded time and memory; nothing is silently clamped or accepted.

The first half pins each root cause with a small example; the second half generates mutations of the shipped
arch and workload files with hypothesis (`--hypothesis-show-statistics` prints what the cases ended in).
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import attrs
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpusim import ArchError, GpusimError, load_arch, occupancy
from gpusim.arch import arch_dir, load_arch_file, parse_arch
from gpusim.arch import load as load_module
from gpusim.arch.load import MAX_NUMBER_CHARS, MAX_YAML_BYTES, MAX_YAML_DEPTH, STREAM_WAIT_S, read_yaml
from gpusim.arch.spec import ArchSpec, describe_fields
from gpusim.workload.yamlio import WorkloadError, load_yaml_with_lines

from tests.conftest import ARCH_NAMES, ROOT, kernel_workloads, run_cli

MESSAGE_LIMIT = 300
H100 = (arch_dir() / "h100.yaml").read_text()
WORKLOADS = kernel_workloads()


# Time limits: a case slower than its budget fails; a test's timeout mark (pytest-timeout) ends a hang, with the
# same budget where the test is one case
REFUSE_S = 5.0  # a load that must be refused
CASE_S = 5.0  # a generated arch or workload file, loaded
SIMULATED_CASE_S = 60.0  # a generated arch file, loaded and a tiny kernel run on it
GENERATED_S = 120  # a test of 500 generated cases (under 5 s on the 2-core machine; their budgets sum past 600 s)


@pytest.fixture
def tmp_path(short_tmp_path):
    """The messages here start with the file's path, compared in full: a short one (see short_tmp_path)."""
    return short_tmp_path


def _one_line(exc: BaseException, path: Path | str | None = None) -> str:
    msg = str(exc)
    assert "\n" not in msg and len(msg) <= MESSAGE_LIMIT, f"{len(msg)} chars: {msg[:400]!r}"
    if path is not None:
        assert msg.startswith(str(path)), msg
    return msg


def _refused(load, path, error=GpusimError, budget: float = REFUSE_S) -> str:
    """`load(path)` raises a one-line `error` naming the file, within `budget` seconds (the test's timeout mark
    ends a hang)."""
    start = time.monotonic()
    with pytest.raises(error) as info:
        load(path)
    assert time.monotonic() - start < budget
    return _one_line(info.value, path)


def _write(tmp_path: Path, content: str | bytes, name: str = "hostile.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def _bomb(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


# --- 1. aliases, size, endless streams, long names ---------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize("levels", [6, 8])
@pytest.mark.timeout(REFUSE_S)
def test_alias_bomb_in_an_arch_file_is_refused_at_its_line(tmp_path, levels):
    path = _write(tmp_path, H100 + _bomb(levels))
    msg = _refused(load_arch_file, path, ArchError)
    line = H100.count("\n") + 1
    assert msg.startswith(f"{path}:{line}: ") and "anchors and aliases are not accepted" in msg, msg


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_alias_bomb_in_a_workload_is_refused(tmp_path):
    path = _write(tmp_path, _bomb(8) + (ROOT / "workloads/vecadd.yaml").read_text())
    msg = _refused(load_yaml_with_lines, path, WorkloadError)
    assert msg.startswith(f"{path}:1: ") and "aliases" in msg


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_a_single_harmless_alias_is_refused_too(tmp_path):
    """No expansion budget to tune: an anchor is an error wherever it is (write the value out)."""
    text = H100.replace("  tpcs_per_gpc: 9 ", "  tpcs_per_gpc: &nine 9 ")
    msg = _refused(load_arch_file, _write(tmp_path, text), ArchError)
    assert "'nine'" in msg and "anchors and aliases" in msg


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_merge_keys_are_refused(tmp_path):
    msg = _refused(read_yaml, _write(tmp_path, "a: {<<: {x: 1}, y: 2}\n"))
    assert "merge keys" in msg


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_file_over_the_size_cap_is_refused_without_reading_it(tmp_path):
    path = _write(tmp_path, H100 + "#" * MAX_YAML_BYTES + "\n")
    assert "larger than the 4 MiB" in _refused(load_arch_file, path, ArchError)


@pytest.mark.fast
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.timeout(10)
def test_endless_devices_read_at_most_the_cap(device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    assert "larger than the 4 MiB" in _refused(load_arch_file, device, ArchError, budget=10)


def _fifo(tmp_path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    path = tmp_path / "arch.fifo"
    os.mkfifo(path)
    return path


@pytest.mark.fast
@pytest.mark.timeout(STREAM_WAIT_S + 5)
def test_fifo_fed_forever_is_cut_at_the_cap(tmp_path):
    path, stop = _fifo(tmp_path), threading.Event()

    def writer():
        with contextlib.suppress(OSError), open(path, "wb") as f:
            while not stop.is_set():
                f.write(b"# endless\n" * 1000)
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        assert "larger than the 4 MiB" in _refused(load_arch_file, path, ArchError, budget=STREAM_WAIT_S + 5)
    finally:
        stop.set()


@pytest.mark.timeout(5)
def test_fifo_that_stalls_times_out(tmp_path, monkeypatch):
    monkeypatch.setattr(load_module, "STREAM_WAIT_S", 1.0)
    path, stop = _fifo(tmp_path), threading.Event()

    def writer():
        with open(path, "wb") as f:
            f.write(b"name: h100\n")
            f.flush()
            stop.wait(30)  # holds the FIFO open, writes nothing more
    threading.Thread(target=writer, daemon=True).start()
    time.sleep(0.2)
    try:
        msg = _refused(load_arch_file, path, ArchError, budget=5)
    finally:
        stop.set()
    assert "no data within 1 s" in msg


@pytest.mark.fast
@pytest.mark.timeout(10)
def test_fifo_with_a_whole_file_loads(tmp_path):
    """`--arch <(sed ... arch/h100.yaml)` works: a stream that ends is read like a file."""
    path = _fifo(tmp_path)

    def writer():
        with open(path, "w") as f:
            f.write(H100)
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    time.sleep(0.2)
    assert load_arch_file(path).sms == 132
    thread.join(5)


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_directory_is_refused():
    assert "cannot read" in _refused(load_arch_file, arch_dir(), ArchError)


@pytest.mark.fast
@pytest.mark.parametrize("name", ["x" * 5000, "x" * 5000 + ".yaml", "a/" * 2500, "h100\n\x1b[31mred", "h\x00100"])
def test_hostile_arch_names_get_short_one_line_errors(name):
    with pytest.raises(ArchError) as info:
        load_arch(name)
    msg = _one_line(info.value)
    assert len(msg) < 200 and msg.isprintable(), msg


def test_long_arch_name_through_cli():
    proc = run_cli("occupancy", "--arch", "q" * 5000, "--threads", "256", "--regs", "32")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 250 and "unknown arch" in lines[0], proc.stderr[:300]


def test_endless_arch_stream_through_cli():
    proc = run_cli("occupancy", "--arch", "/dev/zero", "--threads", "256", "--regs", "32")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: /dev/zero: larger than the 4 MiB a YAML input may hold"]


# --- 2. encodings, nesting, number literals ----------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize("load, error", [(load_arch_file, ArchError), (load_yaml_with_lines, WorkloadError)])
@pytest.mark.timeout(REFUSE_S)
def test_non_utf8_bytes_name_file_and_line(tmp_path, load, error):
    data = H100.encode().replace(b"full_name: NVIDIA", b"full_name: NVIDIA\xff\xfe", 1)
    line = H100[:H100.index("full_name:")].count("\n") + 1
    msg = _refused(load, _write(tmp_path, data), error)
    assert msg.startswith(f"{tmp_path / 'hostile.yaml'}:{line}: not UTF-8 text (byte 0xff"), msg


@pytest.mark.fast
def test_utf8_with_bom_and_non_ascii_text_loads(tmp_path):
    text = "\ufeff" + H100.replace("memory_note: HBM3", "memory_note: HBM3 — 5 Stapel (Größe)")
    assert load_arch_file(_write(tmp_path, text)).clocks.memory_note.startswith("HBM3 — 5")


@pytest.mark.fast
@pytest.mark.parametrize("char", ["\x00", "\x1b", "\x7f"])
@pytest.mark.timeout(REFUSE_S)
def test_control_characters_are_refused_with_the_line(tmp_path, char):
    text = H100.replace("name: h100", f"name: h1{char}00", 1)
    msg = _refused(load_arch_file, _write(tmp_path, text), ArchError)
    assert ":" in msg and msg.isprintable(), msg


@pytest.mark.fast
@pytest.mark.parametrize("shape", ["list", "flow_map", "block_map", "block_list"])
@pytest.mark.timeout(REFUSE_S)
def test_deep_nesting_is_capped(tmp_path, shape):
    n = 300
    text = {"list": "name: " + "[" * n + "]" * n + "\n",
            "flow_map": "name: " + "{a: " * n + "1" + "}" * n + "\n",
            "block_map": "".join("  " * i + f"k{i}:\n" for i in range(n)) + "  " * n + "x: 1\n",
            "block_list": "".join("  " * i + "-\n" for i in range(n))}[shape]
    msg = _refused(load_arch_file, _write(tmp_path, text), ArchError)
    assert f"nested deeper than {MAX_YAML_DEPTH} levels" in msg, msg


@pytest.mark.fast
def test_nesting_up_to_the_cap_is_read(tmp_path):
    depth = MAX_YAML_DEPTH - 1  # the top-level mapping is the first level
    data = read_yaml(_write(tmp_path, "a: " + "[" * depth + "]" * depth + "\n"))
    for _ in range(depth):
        data = data["a"] if isinstance(data, dict) else data[0]


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_5000_digit_integer_names_the_key(tmp_path):
    text = H100.replace("  gpcs: 8 ", "  gpcs: " + "9" * 5000 + " ", 1)
    line = H100[:H100.index("  gpcs:")].count("\n") + 1
    msg = _refused(load_arch_file, _write(tmp_path, text), ArchError)
    assert msg.startswith(f"{tmp_path / 'hostile.yaml'}:{line}: ") and "'gpcs'" in msg
    assert f"a number literal of 5,000 characters (at most {MAX_NUMBER_CHARS})" in msg


@pytest.mark.fast
@pytest.mark.parametrize("literal", ["1" + ":59" * 2000, "0x" + "f" * 5000, "1" * 200 + ".5", "0b" + "1" * 9000])
@pytest.mark.timeout(REFUSE_S)
def test_every_long_number_literal_is_refused(tmp_path, literal):
    msg = _refused(read_yaml, _write(tmp_path, f"params:\n  n: {literal}\n"))
    assert "key 'n'" in msg and "number literal" in msg


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_a_bad_list_item_names_the_key_holding_the_list(tmp_path):
    text = H100.replace("carveout_steps_kb: [0, 8,", "carveout_steps_kb: [0, " + "8" * 300 + ",", 1)
    assert "key 'carveout_steps_kb': a number literal" in _refused(load_arch_file, _write(tmp_path, text), ArchError)


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_deep_nesting_names_the_outer_keys(tmp_path):
    text = H100.replace("  per_sm_bytes: 233472 ", "  per_sm_bytes: " + "[" * 100 + "]" * 100 + " ", 1)
    msg = _refused(load_arch_file, _write(tmp_path, text), ArchError)
    assert "shared_memory.per_sm_bytes: nested deeper than 64 levels" in msg, msg


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_impossible_timestamp_is_one_line(tmp_path):
    assert "key 'date'" in _refused(read_yaml, _write(tmp_path, "date: 0000-01-01\n"))


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_python_tags_are_refused(tmp_path):
    text = "kernel: !!python/object/apply:os.system ['echo hi']\n"
    assert "could not determine a constructor" in _refused(read_yaml, _write(tmp_path, text))


# --- 3. duplicate keys -------------------------------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_duplicate_arch_key_names_both_lines(tmp_path):
    text = H100.replace("  enabled_sms: 132 ", "  enabled_sms: 132\n  gpcs: 1 ", 1)
    first = H100[:H100.index("  gpcs:")].count("\n") + 1
    second = text[:text.index("  gpcs: 1")].count("\n") + 1
    msg = _refused(load_arch_file, _write(tmp_path, text), ArchError)
    assert msg.startswith(f"{tmp_path / 'hostile.yaml'}:{second}: ") and f"also on line {first}" in msg, msg
    assert "duplicate key 'gpcs'" in msg


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_duplicate_top_level_section_is_an_error(tmp_path):
    msg = _refused(load_arch_file, _write(tmp_path, H100 + "clocks: {core_mhz: 1, tensor_mhz: 1}\n"), ArchError)
    assert "duplicate key 'clocks'" in msg


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_duplicate_workload_key_names_both_lines(tmp_path):
    text = "kernel: k\nlaunch: {grid: [1], block: [32], registers_per_thread: 8, grid: [2]}\nprogram: [{op: FFMA}]\n"
    msg = _refused(load_yaml_with_lines, _write(tmp_path, text), WorkloadError)
    assert msg.startswith(f"{tmp_path / 'hostile.yaml'}:2: ") and "duplicate key 'grid' (also on line 2)" in msg


@pytest.mark.fast
@pytest.mark.timeout(REFUSE_S)
def test_keys_equal_in_python_are_duplicates(tmp_path):
    """`1` and `true` are one dict key; the second would silently replace the first."""
    assert "duplicate key True" in _refused(read_yaml, _write(tmp_path, "x:\n  1: a\n  true: b\n"))


@pytest.mark.fast
def test_lines_are_kept_for_errors(tmp_path):
    data = read_yaml(_write(tmp_path, "a: 1\nb:\n  c: 2\n"))
    assert (data.line, data.key_lines, data["b"].line, data["b"].key_lines) == (1, {"a": 1, "b": 2}, 3, {"c": 3})


# --- 4. architecture fields within plausible ranges --------------------------------------------------------

def _data():
    return yaml.safe_load(H100)


def _set(data, path: str, value):
    *head, last = path.split(".")
    for key in head:
        data = data[key]
    data[last] = value


def _arch_error(path: str, value) -> str:
    data = _data()
    _set(data, path, value)
    with pytest.raises(ArchError) as info:
        parse_arch(data, "custom.yaml")
    msg = _one_line(info.value, "custom.yaml")
    assert f"'{path}'" in msg or f"'{path.rsplit('.', 1)[0]}" in msg, msg
    return msg


@pytest.mark.fast
@pytest.mark.parametrize("path, value", [
    ("structure.gpcs", 10**12), ("structure.sms_per_tpc", 10**6), ("structure.enabled_sms", 5000),
    ("memory.l2.size_bytes", 2**40), ("memory.dram.channels", 10**9),
    ("shared_memory.reserved_per_block_bytes", 10**15), ("clocks.core_mhz", 1e12), ("memory.dram.latency", 10**7),
    ("sm.max_warps", 10**6), ("memory.l1.mshrs", 10**9), ("pipelines.memory_queue_depth", 10**9),
])
def test_huge_values_are_refused_with_the_range(path, value):
    msg = _arch_error(path, value)
    assert "expected" in msg and "up to" in msg or "from" in msg, msg


@pytest.mark.fast
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("path", ["clocks.core_mhz", "clocks.tensor_mhz", "pipelines.fp64.lanes",
                                  "memory.dram.bandwidth_gbs", "memory.dram.capacity_gb",
                                  "memory.dram.read_efficiency"])
def test_nan_and_inf_are_refused(path, value):
    assert f"got {value!r}" in _arch_error(path, value)


@pytest.mark.fast
@pytest.mark.parametrize("path", ["structure.gpcs", "clocks.core_mhz", "pipelines.fp32.lanes",
                                  "memory.dram.read_efficiency", "pipelines.tensor.warp_mma_flops_per_clock"])
def test_booleans_are_not_numbers(path):
    assert "got True" in _arch_error(path, True)


@pytest.mark.fast
def test_cache_geometry_that_would_fill_memory_is_refused():
    data = _data()
    data["memory"]["l2"].update(size_bytes=2**30, line_bytes=16, sector_bytes=16, associativity=1)
    with pytest.raises(ArchError, match=r"'memory.l2.associativity'.*at most 1,048,576 sets"):
        parse_arch(data, "custom.yaml")


@pytest.mark.fast
def test_direct_mapped_l2_of_a_shipped_size_is_accepted():
    data = _data()
    data["memory"]["l2"]["associativity"] = 1
    assert parse_arch(data, "custom.yaml").memory.l2.associativity == 1


@pytest.mark.fast
def test_l1_with_too_many_sets_is_refused():
    data = _data()
    data["memory"]["l1"].update(line_bytes=16, sector_bytes=16, associativity=1)
    with pytest.raises(ArchError, match=r"'memory.l1.associativity'.*4,096 sets per SM"):
        parse_arch(data, "custom.yaml")


@pytest.mark.fast
@pytest.mark.parametrize("path, value, expected", [
    ("name", "h100\nINJECTED", "one line"), ("full_name", "x" * 10_000, "at most 200"),
    ("compute_capability", "9" * 500 + ".0", "'major.minor'"), ("sm.warp_size", 64, "expected 32"),
    ("shared_memory.carveout_steps_kb", list(range(0, 200_000, 1000)), "1 to 64 sizes"),
    ("clocks", [1, 2], "expected a mapping of Clocks keys"),
])
def test_strings_and_shapes_are_bounded(path, value, expected):
    assert expected in _arch_error(path, value)


@pytest.mark.fast
def test_every_number_field_states_its_range():
    def walk(cls):
        for a in attrs.fields(attrs.resolve_types(cls)):
            if attrs.has(a.type if isinstance(a.type, type) else object):
                walk(a.type)
            elif a.type not in ("bool", bool):
                assert a.metadata.get("range"), f"{cls.__name__}.{a.name} states no range"
    walk(ArchSpec)
    rows = describe_fields(attrs.fields(ArchSpec).structure.type, with_range=True)
    assert ("gpcs", "count", "graphics processing clusters in the enabled part", "a positive integer up to 64") in rows


@pytest.mark.fast
@pytest.mark.parametrize("name", ARCH_NAMES)
def test_every_shipped_arch_is_inside_the_ranges(name):
    spec = load_arch_file(arch_dir() / f"{name}.yaml")
    assert spec.name == name


@pytest.mark.fast
def test_evolve_is_validated_too():
    spec = load_arch("h100")
    with pytest.raises(ValueError, match="gpcs: expected a positive integer up to 64"):
        attrs.evolve(spec.structure, gpcs=10**12)


@pytest.mark.fast
def test_pure_python_yaml_refuses_the_same(tmp_path):
    """Without libyaml (PyYAML's own parser) the same checks hold."""
    cases = {"bomb": _bomb(8), "deep": "a: " + "[" * 300 + "]" * 300 + "\n", "dup": "a: 1\na: 2\n",
             "big": "a: " + "9" * 5000 + "\n"}
    for name, text in cases.items():
        _write(tmp_path, text, f"{name}.yaml")
    code = ("import sys, yaml; yaml.__dict__.pop('CSafeLoader', None)\n"
            "from gpusim.arch.load import read_yaml, _Loader\n"
            "assert _Loader.__mro__[1] is yaml.SafeLoader\n"
            "for p in sys.argv[1:]:\n"
            "    try: read_yaml(p)\n"
            "    except Exception as e: print(type(e).__name__, e)\n")
    proc = subprocess.run([sys.executable, "-c", code, *(str(tmp_path / f"{n}.yaml") for n in cases)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    out = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(out) == 4, proc.stderr[-2000:]
    for line, want in zip(out, ["aliases", "nested deeper", "duplicate key 'a'", "number literal"]):
        assert line.startswith("GpusimError ") and want in line, line


# --- generated hostile files (hypothesis) -----------------------------------------------------------------

HOSTILE_VALUES = st.one_of(
    st.sampled_from([0, -1, -(2**63), 2**63, 10**12, 10**99, 1.5, -0.0, 1e308, math.nan, math.inf, -math.inf,
                     True, False, None, "", "x" * 5000, "12", "1e3", "\n", [], {}, [1, 2], {"a": 1}]),
    st.integers(), st.floats(), st.text(max_size=50),
    st.integers(1, 200).map(lambda d: _nested(d, "list")), st.integers(1, 200).map(lambda d: _nested(d, "map")),
)


def _nested(depth: int, kind: str):
    value: object = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


def _leaves(data, prefix=()):
    """Every key path in a parsed mapping (mappings and leaves)."""
    for key, value in data.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from _leaves(value, (*prefix, key))


def _structural(draw, data):
    """A data-level mutation: replace a value, delete a key, add an unknown one."""
    paths = list(_leaves(data))
    path = draw(st.sampled_from(paths))
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    kind = draw(st.sampled_from(["replace", "replace", "replace", "delete", "unknown_key"]))
    if kind == "replace":
        parent[path[-1]] = draw(HOSTILE_VALUES)
    elif kind == "delete":
        del parent[path[-1]]
    else:
        parent[draw(st.text(min_size=1, max_size=20))] = draw(HOSTILE_VALUES)
    return kind, path


def _textual(draw, text: str) -> tuple[str, bytes]:
    """A text- or byte-level mutation of a YAML file."""
    lines = text.splitlines(keepends=True)
    kind = draw(st.sampled_from(["dup_line", "alias", "bomb", "bad_bytes", "random_bytes", "deep", "long_number",
                                 "truncate", "swap_lines"]))
    i = draw(st.integers(0, len(lines) - 1))
    if kind == "dup_line":
        lines.insert(i, lines[i])
    elif kind == "alias":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i] = lines[i].replace(": ", ": &x ", 1)
        lines[j] = lines[j].split(":", 1)[0] + ": *x\n" if ":" in lines[j] else "- *x\n"
    elif kind == "bomb":
        lines.insert(i if lines[i][:1].isalpha() else 0, _bomb(draw(st.integers(1, 9))))
    elif kind in ("bad_bytes", "random_bytes"):
        data = "".join(lines).encode()
        at = draw(st.integers(0, len(data)))
        junk = (draw(st.binary(min_size=1, max_size=8)) if kind == "random_bytes" else
                bytes([draw(st.integers(0x80, 0xBF))]))
        return kind, data[:at] + junk + data[at:]
    elif kind == "deep":
        depth = draw(st.integers(1, 400))
        opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
        lines[i] = lines[i].split(":", 1)[0] + ": " + opener * depth + "1" + closer * depth + "\n"
    elif kind == "long_number":
        lines[i] = lines[i].split(":", 1)[0] + ": " + "7" * draw(st.integers(90, 6000)) + "\n"
    elif kind == "truncate":
        return kind, "".join(lines).encode()[:draw(st.integers(0, len(text)))]
    else:
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    return kind, "".join(lines).encode()


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # generating cases fast leaves the time for checking them
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_TEXTS = {**{name: (arch_dir() / f"{name}.yaml").read_text() for name in ARCH_NAMES},
          **{str(path): path.read_text() for path in WORKLOADS}}


def _dump(data) -> bytes:
    return yaml.dump(data, Dumper=_DUMPER, allow_unicode=True, width=10**6).encode()


@st.composite
def hostile_arch(draw):
    text = _TEXTS[draw(st.sampled_from(ARCH_NAMES))]
    if draw(st.booleans()):
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
        kind, path = _structural(draw, data)
        return kind, ".".join(map(str, path)), _dump(data)
    kind, content = _textual(draw, text)
    return kind, None, content


@st.composite
def hostile_workload(draw):
    text = _TEXTS[str(draw(st.sampled_from(WORKLOADS)))]
    if draw(st.booleans()):
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
        kind, _ = _structural(draw, data)
        return kind, _dump(data)
    return _textual(draw, text)


TINY_KERNEL = """\
kernel: tiny
buffers: {a: {bytes: 16384}, s: {bytes: 1024, space: shared}}
launch: {grid: [4], block: [64], registers_per_thread: 32}
program:
  - loop: 2
    body:
      - {op: LDG.E, dst: r1, addr: "a + gtid * 4"}
      - {op: STS, src: [r1], addr: "s + (tid % 256) * 4"}
      - {op: BAR.SYNC}
      - {op: LDS, dst: r2, addr: "s + (tid % 256) * 4"}
      - {op: FFMA, dst: r3, src: [r2, r1, r3]}
      - {op: DFMA, dst: r4, src: [r4, r4, r4]}
      - {op: MUFU.EX2, dst: r5, src: [r3]}
      - {op: HMMA.16816.F32, dst: r6, src: [r6, r6, r6]}
      - {op: ATOMG.E.ADD, dst: r7, src: [r3], addr: "a + (gtid % 4) * 4"}
      - {op: STG.E, src: [r3], addr: "a + gtid * 4"}
"""


def _simulate(directory: Path, spec) -> str:
    """A tiny kernel on two SMs of an accepted arch: a result or a one-line error, never a hang."""
    import gpusim

    kernel = directory / "tiny.yaml"
    kernel.write_text(TINY_KERNEL)
    try:
        gpusim.run(kernel, spec, sms=min(2, spec.sms))
    except GpusimError as exc:
        _one_line(exc)
        return "loaded, run refused"
    return "loaded and ran"


def _check_arch_case(directory: Path, case, simulate: bool = False) -> str:
    kind, path, content = case
    file = directory / "case.yaml"
    file.write_bytes(content)
    budget, start = SIMULATED_CASE_S if simulate else CASE_S, time.monotonic()
    try:
        spec = load_arch_file(file)
    except ArchError as exc:
        msg = _one_line(exc, file)
        if kind in ("bad_bytes",):
            assert "not UTF-8" in msg, msg
        if kind == "bomb":
            assert "aliases" in msg, msg
        if kind == "replace" and path and path.rsplit(".", 1)[-1] not in msg:
            # the replaced field is named, unless the new value was fine for it and a neighbour objected
            assert "expected" in msg, msg
        outcome = "refused: " + _category(msg)
    else:
        assert kind not in ("bomb", "bad_bytes")
        try:  # an accepted file must also survive the occupancy calculator
            occupancy(spec, 256, 32, 0)
        except (ValueError, GpusimError) as exc:
            _one_line(exc)
        outcome = _simulate(directory, spec) if simulate else "loaded"
    assert time.monotonic() - start < budget, f"{kind}: {outcome} after more than {budget} s"
    event(f"arch {kind}: {outcome}")
    return outcome


def _check_workload_case(directory: Path, case) -> str:
    kind, content = case
    file = directory / "case.yaml"
    file.write_bytes(content)
    start = time.monotonic()
    try:
        load_yaml_with_lines(file)
    except WorkloadError as exc:
        outcome = "refused: " + _category(_one_line(exc, file))
    else:
        assert kind not in ("bomb", "bad_bytes")
        outcome = "parsed"
    assert time.monotonic() - start < CASE_S, f"{kind}: {outcome} after more than {CASE_S} s"
    event(f"workload {kind}: {outcome}")
    return outcome


def _category(msg: str) -> str:
    for words in ("not UTF-8", "aliases", "nested deeper", "duplicate key", "number literal", "not valid YAML",
                  "unknown key", "missing key", "expected a mapping", "expected"):
        if words in msg:
            return words
    return "other"


@pytest.fixture(scope="module")
def case_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile")


CI = settings(max_examples=500, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BIG = settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])


@pytest.mark.timeout(GENERATED_S)
@CI
@given(case=hostile_arch())
def test_generated_hostile_arch_files(case_dir, case):
    _check_arch_case(case_dir, case)


@pytest.mark.timeout(GENERATED_S)
@CI
@given(case=hostile_workload())
def test_generated_hostile_workload_yaml(case_dir, case):
    _check_workload_case(case_dir, case)


@pytest.mark.benchmark
@BIG
@given(case=hostile_arch())
def test_generated_hostile_arch_files_large(case_dir, case):
    """Also runs a tiny kernel on every accepted arch (values at the ends of their ranges included)."""
    _check_arch_case(case_dir, case, simulate=True)


@pytest.mark.benchmark
@BIG
@given(case=hostile_workload())
def test_generated_hostile_workload_yaml_large(case_dir, case):
    _check_workload_case(case_dir, case)


@pytest.mark.fast
@pytest.mark.parametrize("line, value, field", [
    ("pcie_generation: 5", "0", "pcie_generation"),
    ("h2d_bandwidth_gbs: 51", "-51", "h2d_bandwidth_gbs"),
    ("d2h_bandwidth_gbs: 52", "fast", "d2h_bandwidth_gbs"),
    ("host_latency_us: 6", "-1", "host_latency_us"),
    ("copy_engines: 3", "0", "copy_engines"),
    ("nvlink_bandwidth_gbs: 450", "-450", "nvlink_bandwidth_gbs"),
    ("nvswitch: true", "sometimes", "nvswitch"),
    ("allreduce_bus_bandwidth_gbs: 478.87", "[1, 2]", "allreduce_bus_bandwidth_gbs"),
])
def test_a_bad_interconnect_field_is_one_line_naming_the_file_and_key(tmp_path, line, value, field):
    """Every interconnect field refuses a value out of its range or of the wrong type, in one line naming the
    file and the key."""
    text = (ROOT / "arch" / "h100.yaml").read_text()
    assert line in text
    path = tmp_path / "h100x.yaml"
    path.write_text(text.replace(line, f"{line.split(':')[0]}: {value}", 1))
    with pytest.raises(GpusimError) as info:
        load_arch(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and f"interconnect.{field}" in message, message
