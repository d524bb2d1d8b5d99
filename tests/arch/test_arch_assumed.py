"""`gpusim archs --assumed`: the arch-file values marked R (no measured or datasheet source), read from the files'
comments (gpusim/arch/provenance.py)."""

import json
import re

import pytest

from gpusim.arch import arch_dir, known_archs, load_arch
from gpusim.arch.provenance import (assumed_fields, comment_of, field_notes, marked_keys, misread_markers,
                                    stray_markers)
from gpusim.report.archs import field_rows

from tests.conftest import ARCH_NAMES, run_cli


@pytest.fixture(scope="module")
def listed() -> dict:
    proc = run_cli("archs", "--assumed", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_every_arch_appears(listed):
    assert sorted(listed) == sorted(ARCH_NAMES) == known_archs()
    assert all(isinstance(fields, list) and all(isinstance(f, str) for f in fields) for fields in listed.values())
    assert all(listed[name] for name in ARCH_NAMES)  # every file assumes something (front-end timing at least)


@pytest.mark.fast
def test_every_listed_field_exists_in_the_spec_and_the_file(listed):
    schema = {row["field"] for row in field_rows()}
    for name, fields in listed.items():
        in_file = [field for field, _comment, _assumed in field_notes(arch_dir() / f"{name}.yaml")]
        assert len(fields) == len(set(fields)), name
        assert set(fields) <= schema, (name, set(fields) - schema)
        assert set(fields) <= set(in_file), (name, set(fields) - set(in_file))
        spec = load_arch(name)
        for field in fields:  # a value the loaded spec holds, not an absent optional group
            value = spec
            for part in field.split("."):
                value = getattr(value, part)
            assert value is not None, (name, field)


@pytest.mark.fast
def test_every_listed_field_is_marked_and_every_marked_field_is_listed(listed):
    for name in ARCH_NAMES:
        notes = field_notes(arch_dir() / f"{name}.yaml")
        assert [field for field, _comment, assumed in notes if assumed] == listed[name]
        for field, comment, assumed in notes:
            if assumed:
                assert re.search(r"(^|\s)R\b", comment), (name, field, comment)


@pytest.mark.fast
@pytest.mark.parametrize("name, field", [
    ("h100", "memory.dram.bandwidth_gbs"),  # [DS] datasheet
    ("h100", "memory.l1.hit_latency"),  # [VAL] measured
    ("h100", "memory.l2.hit_latency"),  # [VAL] measured
    ("h100", "memory.dram.latency"),  # [VAL] measured
    ("h100", "pipelines.ldst.lanes"),  # [WP] on a line whose latency is R: the key R marks the latency alone
    ("h100", "structure.enabled_sms"),  # [WP]
    ("h200", "memory.dram.read_efficiency"),  # [VAL]
    ("h200", "pipelines.tensor.warp_mma_flops_per_clock"),  # [VAL]
    ("a100", "pipelines.fp64.lanes"),  # [WP]; its latency is R
    ("v100", "memory.l2.bandwidth_bytes_per_clock"),  # [A100 WP]
    ("b200", "pipelines.tensor.rates.fp16.dense"),  # [HGX]
    ("t4", "memory.l2.hit_latency"),  # [JIA19] measured
])
def test_a_sourced_field_is_not_listed(listed, name, field):
    notes = {f: comment for f, comment, _assumed in field_notes(arch_dir() / f"{name}.yaml")}
    assert notes[field].startswith("["), notes[field]  # the file gives it a source
    assert field not in listed[name]


@pytest.mark.fast
def test_a_field_whose_comment_starts_with_a_source_and_has_no_marker_is_not_listed(listed):
    for name in ARCH_NAMES:
        for field, comment, _assumed in field_notes(arch_dir() / f"{name}.yaml"):
            if comment.startswith("[") and not re.search(r"\bR\b", comment):
                assert field not in listed[name], (name, field, comment)


@pytest.mark.fast
@pytest.mark.parametrize("name, field", [
    ("h100", "frontend.branch_resolve_cycles"), ("h100", "pipelines.ldst.latency"),
    ("h100", "memory.l2.atomic_cycles_per_address_update"), ("a100", "pipelines.fp64.latency"),
    ("b300", "pipelines.tensor.rates.int8.dense"), ("b200", "memory.dram.write_efficiency"),
])
def test_an_assumed_field_is_listed(listed, name, field):
    assert field in listed[name]


@pytest.mark.fast
def test_no_marker_in_the_files_is_missed():
    """An R in a value's comment that the reader would not take as a marker (neither leading nor `key R`) is
    a mistake: a person reads it as 'assumed', `archs --assumed` would not list it. Every value but the names
    states a source."""
    for name in ARCH_NAMES:
        path = arch_dir() / f"{name}.yaml"
        assert misread_markers(path) == [], name
        unsourced = [field for field, comment, _assumed in field_notes(path)
                     if not comment and field not in ("name", "full_name")]
        assert unsourced == [], name


@pytest.mark.fast
def test_gh100_latencies_agree():
    """The H100 SXM5 and the H200 are one GH100 die at one clock: every latency and the front-end timing come
    from one source, the same number in both files."""
    h100, h200 = load_arch("h100"), load_arch("h200")

    def latencies(spec, prefix=""):
        import attrs

        out = {}
        for a in attrs.fields(type(spec)):
            value = getattr(spec, a.name)
            if attrs.has(type(value)):
                out.update(latencies(value, f"{prefix}{a.name}."))
            elif "latency" in a.name or a.name.endswith("_cycles") or a.name.endswith("_mhz"):
                out[prefix + a.name] = value
        return out

    ours, theirs = latencies(h100), latencies(h200)
    assert "memory.dram.latency" in ours and "pipelines.tensor.latency" in ours and "clocks.core_mhz" in ours
    assert ours == theirs, {k: (ours[k], theirs[k]) for k in ours if ours[k] != theirs.get(k)}


@pytest.mark.fast
@pytest.mark.parametrize("line, expected", [
    ("  x: 1   # [WP] a source", "[WP] a source"),
    ("  x: 1", ""),
    ("  note: 'a # in quotes'   # [DS] real", "[DS] real"),
    ('  note: "HBM3 #5"', ""),
    ("  note: a#b   # R", "R"),
    ("# header", "header"),
])
def test_comment_of(line, expected):
    assert comment_of(line) == expected


@pytest.mark.fast
@pytest.mark.parametrize("comment, keys, marked", [
    ("R", ["x"], {"x"}),
    ("R: model assumption", ["x"], {"x"}),
    ("R (as Hopper)", ["lanes", "latency"], {"lanes", "latency"}),
    ("[WP] 32 FP64/SM; latency R ([AS] uses 6)", ["lanes", "latency"], {"latency"}),
    ('[HGX3] "INT8 2 POPS*"; dense R:', ["dense", "sparse"], {"dense"}),
    ("[WP] 32 LD/ST units/SM", ["lanes", "latency"], set()),
    ("[PG] (the ISA encodes R0-R254)", ["x"], set()),
    ("Rough: [DS]", ["x"], set()),
    ("[JIA18] R-type", ["x"], set()),
])
def test_marked_keys(comment, keys, marked):
    assert marked_keys(comment, keys) == marked


@pytest.mark.fast
def test_stray_markers_are_found():
    assert stray_markers("[NSVSE] serialized; one per clock is R", ["x"])
    assert stray_markers("[WP] lanes; latency = issue, R", ["lanes", "latency"])
    assert not stray_markers("[WP] lanes; latency R (issue)", ["lanes", "latency"])
    assert not stray_markers("R: assumed", ["x"])


@pytest.mark.fast
def test_a_changed_comment_changes_the_list(tmp_path):
    """The comment is the record: mark a measured value R and it is listed; give an assumed one a source and it
    is not."""
    text = (arch_dir() / "h100.yaml").read_text()
    assert "memory.l2.hit_latency" not in assumed_fields(arch_dir() / "h100.yaml")
    text = re.sub(r"(    hit_latency: 287 +# )\[VAL\]", r"\1R: a guess,", text)
    text = re.sub(r"(  branch_resolve_cycles: 4 +# )R:", r"\1[XX] measured:", text)
    path = tmp_path / "custom.yaml"
    path.write_text(text)
    fields = assumed_fields(path)
    assert "memory.l2.hit_latency" in fields and "frontend.branch_resolve_cycles" not in fields


def test_text_table_names_every_arch_with_its_count(listed):
    proc = run_cli("archs", "--assumed")
    assert proc.returncode == 0, proc.stderr
    for name, fields in listed.items():
        row = next(line for line in proc.stdout.splitlines() if re.match(rf"\W*{name}\b", line))
        assert re.search(rf"\b{len(fields)}\b", row), row
    assert "frontend.branch_resolve_cycles" in proc.stdout


def test_plain_archs_is_unchanged_and_lists_are_exclusive():
    proc = run_cli("archs")
    assert proc.returncode == 0 and "assumed" not in proc.stdout and "989.4" in proc.stdout
    rows = json.loads(run_cli("archs", "--json").stdout)
    assert isinstance(rows, list) and sorted(r["name"] for r in rows) == sorted(ARCH_NAMES)
    for other in ("--fields", "--mig"):
        proc = run_cli("archs", "--assumed", other)
        assert proc.returncode != 0 and "give one" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
