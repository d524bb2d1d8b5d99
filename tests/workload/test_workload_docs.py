"""docs/workload-format.md and `gpusim workload new`: the reference documents every key the loader accepts and
every name, function and operator the evaluator knows (taken from the code, not from a list here); its complete
examples load and count what it says; its error messages are the ones the loader gives; the starting file
that `workload new` writes loads and runs, and an existing file is never replaced without --force."""

import re
from pathlib import Path

import pytest

import gpusim
from gpusim.errors import GpusimError
from gpusim.workload import kernel_mix, load_workload, warp_stream
from gpusim.isa import opcodes
from gpusim.workload import expr, expr_operations, kernel, program
from gpusim.workload.template import kernel_name, template_text, write_template

from tests.conftest import ROOT, run_cli

DOC_PATH = ROOT / "docs" / "workload-format.md"
DOC = DOC_PATH.read_text()


def section(title: str) -> str:
    """The text under a heading (any level) up to the next heading of the same or a higher level."""
    match = re.search(rf"^(#+) {re.escape(title)}\n", DOC, re.M)
    assert match, f"no heading {title!r} in {DOC_PATH.name}"
    level = len(match.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(DOC, match.end())
    return DOC[match.end():end.start() if end else len(DOC)]


def key_table(text: str) -> set[str]:
    """The keys listed in the first table whose header starts with `| key |`."""
    table = text[text.index("| key |"):].split("\n\n")[0]
    return set(re.findall(r"^\| `([a-z_]+)` \|", table, re.M))


# --- (a) every key the loader accepts, in the section about it -----------------------------------------------

KEY_SECTIONS = [("Top-level keys", kernel.TOP_KEYS), ("buffers", kernel.BUFFER_KEYS),
                ("launch", kernel.LAUNCH_KEYS), ("Instructions", program.INSTR_KEYS),
                ("loop", program.LOOP_KEYS), ("if", program.IF_KEYS), ("exit", program.EXIT_KEYS)]


@pytest.mark.fast
@pytest.mark.parametrize("title, accepted", KEY_SECTIONS, ids=[t for t, _ in KEY_SECTIONS])
def test_each_section_documents_exactly_the_keys_the_loader_accepts(title, accepted):
    """A section's key table lists every key the loader accepts there, and none it refuses."""
    assert key_table(section(title)) == set(accepted)


@pytest.mark.fast
def test_statement_kinds_are_documented():
    """The program section names each statement's keys as the loader's constants have them."""
    text = section("program")
    for keys in (program.INSTR_KEYS, program.LOOP_KEYS, program.IF_KEYS, program.EXIT_KEYS):
        for key in keys:
            assert f"`{key}`" in text, key


# --- (b) every expression name, function and operator the evaluator knows ------------------------------------

def _env_names() -> set[str]:
    """The names a warp's expressions see, from the code that builds them (params and buffers aside)."""
    launch = kernel.Launch(grid=(2, 1, 1), block=(64, 1, 1), registers_per_thread=8, shared_memory_bytes=0,
                           dynamic_shared_memory_bytes=0)
    k = kernel.Kernel(name="k", description="", source="k.yaml", params={}, launch=launch, buffers={}, program=(),
                      exit_pc=0, control_names=frozenset(), control_uses_rand=False)
    return {n for n in k.base_env(0, 0) if not n.startswith("__")}


@pytest.mark.fast
def test_every_built_in_name_is_documented():
    """Each built-in name (the loader's list and the names a warp's environment holds) is in the names table."""
    assert _env_names() == kernel.BUILTIN_NAMES
    table = section("Names")
    for name in kernel.BUILTIN_NAMES:
        assert f"`{name}`" in table, name


@pytest.mark.fast
def test_every_function_and_operator_is_documented():
    """Each call the evaluator accepts is in the functions table; each operator in the expressions section."""
    calls = set(expr_operations.CALLS) | {expr.RAND}
    functions = section("Functions")
    for name in calls:
        assert f"`{name}(" in functions, name
    text = section("Expressions")
    for symbol in expr_operations.SYMBOLS.values():
        assert f"`{symbol}`" in text, symbol
    for symbol in ("<", "<=", ">", ">=", "==", "!=", "and", "or", "not", "~"):
        assert f"`{symbol}`" in text, symbol


@pytest.mark.fast
def test_every_width_modifier_is_documented():
    """Each modifier that sets a memory opcode's width is in the instructions section."""
    text = section("Instructions")
    for modifier in opcodes.WIDTHS:
        assert f"`.{modifier}`" in text or f"`.{modifier}`/" in text or f"/`.{modifier}`" in text, modifier


# --- (d) the complete examples load and count what the text says ---------------------------------------------

EXAMPLES = [block for block in re.findall(r"```yaml\n(.*?)```", DOC, re.S) if re.search(r"^kernel:", block, re.M)]
# warp-instructions the text quotes for an example (None: it quotes none)
QUOTED = {"scale": 8192, "gather": 1280, "control": 21, "overlap": 277, "triangle": 67, "transpose_tile": None}


@pytest.mark.fast
def test_the_doc_has_complete_examples():
    assert sorted(re.search(r"^kernel: (\w+)", e, re.M).group(1) for e in EXAMPLES) == sorted(QUOTED)


@pytest.mark.fast
@pytest.mark.parametrize("text", EXAMPLES, ids=[re.search(r"^kernel: (\w+)", e, re.M).group(1) for e in EXAMPLES])
def test_each_complete_example_loads_and_issues_the_count_quoted(text, tmp_path):
    """A complete example (a yaml block with `kernel:`) loads; its warp-instructions are the number quoted."""
    path = tmp_path / "example.yaml"
    path.write_text(text)
    k = load_workload(path)
    assert not k.warnings
    total = kernel_mix(k).total_warp_insts
    if QUOTED[k.name] is not None:
        assert total == QUOTED[k.name] and f"{total:,}" in DOC


def _example(name: str, tmp_path: Path) -> Path:
    text = next(e for e in EXAMPLES if re.search(rf"^kernel: {name}$", e, re.M))
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.mark.fast
def test_control_example_masks_are_the_ones_listed(tmp_path):
    """The listing under the control example is what warp 0 issues: pc, opcode, mask."""
    listed = re.findall(r"^(0x[0-9a-f]{4})  (\S+) +(0x[0-9a-f]{8})", DOC, re.M)
    k = load_workload(_example("control", tmp_path))
    issued = [(f"{i.pc:#06x}", i.op, f"{i.mask:#010x}") for i in warp_stream(k, 0, 0)]
    assert issued == listed


@pytest.mark.fast
def test_overlap_example_issues_the_same_and_its_hides_the_load(tmp_path):
    """Both SIMT modes issue the same instructions; ITS runs the FMA side while the other waits (fewer cycles)."""
    path = _example("overlap", tmp_path)
    stack = gpusim.run(path, "a100", sms=1, simt="stack")
    its = gpusim.run(path, "a100", sms=1, simt="its")
    assert stack.metrics["smsp__inst_executed.sum"] == its.metrics["smsp__inst_executed.sum"] == 277
    assert its.metrics["gpu_sim_cycle"] < stack.metrics["gpu_sim_cycle"]


# --- the error messages the doc quotes are the loader's -----------------------------------------------------

BASE = """kernel: k
params: {n: 4096}
buffers:
  x: {bytes: n * 4}
launch: {grid: [n / 256], block: [256], registers_per_thread: 32}
program:
  - {op: LDG.E, dst: v, addr: "x + gtid * 4"}
"""
LINE7 = '  - {op: LDG.E, dst: v, addr: "x + gtid * 4"}'
# file name -> (text, --set overrides); each makes the message the doc quotes for it
BAD = {
    "unknown_top": BASE.replace("kernel: k", "kernel: k\nthreads: 5"),
    "bad_key": BASE.replace("dst: v,", "dst: v, width: 4,"),
    "comma": BASE.replace('addr: "x + gtid * 4"', "addr: x + min(gtid, 5) * 4"),
    "comma_block": BASE.replace("grid: [n / 256]", "grid: [min(n, 4096) / 256]"),
    "tmpl_unq": BASE.replace(LINE7, "  - {op: FADD, dst: r{rep}, repeat: 2}"),
    "unknown_name": BASE.replace("gtid * 4", "gtidx * 4"),
    "tf": "kernel: k\nlaunch: {grid: [1], block: [32], registers_per_thread: 8}\nprogram:\n  - {op: NOP, pred: true}\n"
          '  - {op: NOP, pred: "lane < 4 and True"}\n  - {op: NOP, pred: "lane < 4 and true"}\n',
    "c2": BASE.replace("grid: [n / 256]", "grid: [lane]"),
    "c3": "kernel: k\nlaunch: {grid: [1], block: [32], registers_per_thread: 8}\nprogram:\n"
          '  - {loop: 2, var: j, body: [{op: NOP}]}\n  - {op: FADD, dst: "r{j}"}\n',
    "call": BASE.replace("gtid * 4", "len(x) * 4"),
    "randbad": BASE.replace("gtid * 4", "rand(1) * 4"),
    "unknown_op": BASE.replace("LDG.E,", "LDX.E,"),
    "noaddr": BASE.replace(', addr: "x + gtid * 4"', ""),
    "addr_on_alu": BASE.replace("LDG.E, dst: v", "FADD, dst: v"),
    "two": BASE.replace("- {op: LDG.E, dst: v", "- {op: LDG.E, loop: 3, dst: v"),
    "stmt": BASE.replace(LINE7, "  - NOP"),
    "notlist": BASE.replace(LINE7, "  - {loop: 2, body: {op: NOP}}"),
    "emptyloop": BASE.replace(LINE7, "  - {loop: 2}"),
    "ifnothen": BASE.replace(LINE7, '  - {if: "lane < 4"}'),
    "shadowloop": BASE.replace(LINE7, "  - {loop: 2, var: n, body: [{op: NOP}]}"),
    "fracloop": BASE.replace(LINE7, '  - {loop: "n / 3.0", body: [{op: NOP}]}'),
    "negloop": BASE.replace(LINE7, '  - {loop: "2 - lane", body: [{op: NOP}]}'),
    "rep_lane": BASE.replace(LINE7, '  - {op: NOP, repeat: "lane"}'),
    "tmpl_lane": BASE.replace(LINE7, '  - {op: FADD, dst: "r{lane}"}'),
    "badreg": BASE.replace("dst: v,", 'dst: "v.x",'),
    "p_expr": BASE.replace("{n: 4096}", "{n: 2**12}"),
    "p_1e6": BASE.replace("{n: 4096}", "{n: 1e6}"),
    "shadow": BASE.replace("  x:", "  tid:"),
    "nobytes": BASE.replace("x: {bytes: n * 4}", "x: {space: global}"),
    "badspace": BASE.replace("x: {bytes: n * 4}", "x: {space: local, bytes: 4}"),
    "smem": BASE.replace("registers_per_thread: 32}", "registers_per_thread: 32, shared_memory_bytes: 16}")
                .replace("x: {bytes: n * 4}", "x: {bytes: n * 4}\n  s: {space: shared, bytes: 256}"),
    "blockbig": BASE.replace("block: [256]", "block: [2048]"),
    "nolaunch": BASE.replace("launch: {grid: [n / 256], block: [256], registers_per_thread: 32}\n", ""),
    "star": BASE.replace('addr: "x + gtid * 4"', "addr: *x"),
    "dup": BASE.replace("kernel: k", "kernel: k\nkernel: j"),
    "base": BASE,  # with --set m=3
    "outside": BASE.replace("gtid * 4", "gtid * 8"),
    "misalign": BASE.replace("gtid * 4", "gtid * 4 + 2"),
    "regs": BASE.replace("registers_per_thread: 32}", "registers_per_thread: 300}"),
}
QUOTED_ERRORS = dict(re.findall(r"`error: ([a-z0-9_]+)\.yaml([^`]*)`", DOC))


@pytest.mark.fast
def test_every_quoted_error_has_its_file_here():
    assert set(QUOTED_ERRORS) == set(BAD)


def _message(path: Path) -> str:
    """The one-line error the file meets: loading, counting, walking every warp, or placing it on an a100."""
    try:
        k = load_workload(path, {"m": 3} if path.stem == "base" else None)
        kernel_mix(k)
        for block in range(k.launch.nblocks):
            for warp in range(k.launch.warps_per_block):
                for _ in warp_stream(k, block, warp):
                    pass
        gpusim.run(k, "a100", sms=1, max_instructions=1)
    except GpusimError as exc:
        return str(exc)
    return "no error"


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(BAD))
def test_each_quoted_error_is_the_loaders_message(name, short_tmp_path):
    """The doc's message for a mistake is, word for word, what gpusim says for it (paths cut to the name)."""
    tmp_path = short_tmp_path  # the message's path is cut off whole: one short enough to be shown in full
    path = tmp_path / f"{name}.yaml"
    path.write_text(BAD[name])
    got = _message(path).replace(f"{tmp_path}/", "")
    assert got == f"{name}.yaml{QUOTED_ERRORS[name]}"


@pytest.mark.fast
def test_the_floor_warning_is_the_loaders(tmp_path):
    path = tmp_path / "floor.yaml"
    path.write_text(BASE.replace("grid: [n / 256]", "grid: [(n + 100) / 256]"))
    warning = load_workload(path).warnings[0].replace(f"{tmp_path}/", "")
    assert f"`warning: {warning}`" in DOC


# --- (c) gpusim workload new ---------------------------------------------------------------------------------

def test_workload_new_writes_a_file_that_loads_and_runs(tmp_path):
    """`workload new` writes a commented workload that loads, uses the main features and runs on one SM."""
    path = tmp_path / "saxpy.yaml"
    proc = run_cli("workload", "new", str(path))
    assert proc.returncode == 0, proc.stderr
    assert str(path) in proc.stdout and "docs/workload-format.md" in proc.stdout
    text = path.read_text()
    assert text.startswith("# ") and "docs/workload-format.md" in text
    k = load_workload(path)
    assert k.name == "saxpy" and not k.warnings
    kinds = {type(node).__name__ for node in _walk(k.program)}
    assert {"Instr", "Loop", "If", "Exit"} <= kinds
    assert any(isinstance(n, program.Instr) and n.pred is not None and n.templated for n in _walk(k.program))
    assert {b.space for b in k.buffers.values()} == {"global", "shared"}
    run = run_cli("run", str(path), "--arch", "a100", "--sms", "1", "--quiet")
    assert run.returncode == 0, run.stderr


def _walk(body):
    for node in body:
        yield node
        if isinstance(node, program.Loop):
            yield from _walk(node.body)
        elif isinstance(node, program.If):
            yield from _walk(node.then)
            yield from _walk(node.orelse)


def test_workload_new_refuses_to_overwrite_without_force(short_tmp_path):
    """An existing file is kept and the error is one line naming it and --force; --force replaces it."""
    path = short_tmp_path / "mine.yaml"  # named in full in the message
    path.write_text("keep me\n")
    proc = run_cli("workload", "new", str(path))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert str(path) in proc.stderr and "--force" in proc.stderr and "Traceback" not in proc.stderr
    assert path.read_text() == "keep me\n"
    forced = run_cli("workload", "new", str(path), "--force")
    assert forced.returncode == 0, forced.stderr
    assert path.read_text() == template_text(path)


@pytest.mark.fast
def test_workload_new_bad_paths_are_one_line_errors(tmp_path):
    """A directory or a path whose folder does not exist is a one-line error naming the path."""
    with pytest.raises(GpusimError, match="is a directory"):
        write_template(tmp_path)
    with pytest.raises(GpusimError, match="cannot write it"):
        write_template(tmp_path / "missing" / "a.yaml")


@pytest.mark.fast
@pytest.mark.parametrize("file, name", [("saxpy.yaml", "saxpy"), ("my-kernel.v2.yaml", "my_kernel"),
                                        ("2d.yaml", "k_2d"), ("yes.yaml", "yes_kernel"), ("null.yml", "null_kernel")])
def test_workload_new_names_the_kernel_after_the_file(file, name, tmp_path):
    """The kernel's name comes from the file's: a plain name that YAML reads as text."""
    assert kernel_name(Path(file)) == name
    path = write_template(tmp_path / file)
    assert load_workload(path).name == name


@pytest.mark.fast
def test_workload_new_is_deterministic(tmp_path):
    """Two files written by `workload new` differ only in the kernel's name and the file's path."""
    a, b = write_template(tmp_path / "k1.yaml"), write_template(tmp_path / "k2.yaml")
    assert a.read_text().replace("k1", "k2") == b.read_text()
