"""Program nodes of a workload (instructions, loops, ifs, exits) and their compilation from YAML."""

from __future__ import annotations

import re
import sys
from typing import Callable

import attrs

from ..isa.tensor import TCGEN05_SHAPE_NEEDED
from ..errors import shorten
from .expr import Expr, ExprError, compile_expr
from ..isa.inst import AsyncOperands
from ..isa.opcodes import (BULK, CLUSTER_ARRIVE, CLUSTER_WAIT, COMMIT, COPY, DSMEM, DSMEM_OPS, MBARRIER_ARRIVE, MBARRIER_INIT,
                      MBARRIER_WAIT, MMA, MMA_FENCE, SYNCS_FORMS, TMEM_ALLOC, TMEM_COPY, TMEM_FREE, TMEM_LOAD, TMEM_STORE,
                      TCGEN05_MMA, TMEM_STORE_WAIT, UMMA, UMMA_COMMIT, UTCATOMSWS_FORMS, WAIT_COPIES, WAIT_MMA,
                      WARPGROUP_FORMS, OpInfo, async_kind, lookup, mma_shape)
from .yamlio import LineDict, WorkloadError

PC_STEP = 16  # bytes per SASS instruction
_REG = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\{[^{}]+\}[A-Za-z0-9_]*)*\Z")
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")

# Operands of asynchronous and cluster instructions (gpusim.engine.asynchrony, gpusim.engine.clusters): kind -> (keys
# it needs, keys it may have)
ASYNC_OPERANDS = {
    COPY: ((), ()), COMMIT: ((), ()), MMA: ((), ()), MMA_FENCE: ((), ()),
    WAIT_COPIES: ((), ("pending",)), WAIT_MMA: ((), ("pending",)),
    BULK: (("barrier", "bytes"), ("rows", "pitch", "multicast")),
    MBARRIER_INIT: (("barrier", "arrivals"), ()),
    MBARRIER_ARRIVE: (("barrier",), ("bytes", "peer")),
    MBARRIER_WAIT: (("barrier",), ()),
    CLUSTER_ARRIVE: ((), ()), CLUSTER_WAIT: ((), ()),
    DSMEM: (("peer",), ()),
    TMEM_ALLOC: (("columns",), ()), TMEM_FREE: (("columns",), ()),
    UMMA: ((), ()), UMMA_COMMIT: (("barrier",), ("multicast",)), TMEM_COPY: (("bytes",), ()),
    TMEM_LOAD: ((), ()), TMEM_STORE: ((), ()), TMEM_STORE_WAIT: ((), ()),
}
ASYNC_KEYS = {"pending", "barrier", "bytes", "rows", "pitch", "arrivals", "peer", "multicast", "columns"}
_KEY_USE = {"pending": "DEPBAR and WARPGROUP.DEPBAR", "barrier": "SYNCS, UTMALDG, UBLKCP and UTCBAR",
            "bytes": "UTMALDG, UBLKCP, SYNCS.ARRIVE and UTCCP", "rows": "UTMALDG and UBLKCP",
            "pitch": "UTMALDG and UBLKCP", "arrivals": "SYNCS.EXCH", "peer": "LDS, STS, ATOMS and SYNCS.ARRIVE",
            "multicast": "UTMALDG, UBLKCP and UTCBAR", "columns": "UTCATOMSWS (tensor-memory allocation)"}
_KEY_MEANING = {"barrier": "the mbarrier's name", "bytes": "the bytes it copies", "arrivals": "arrivals per phase",
                "peer": "the rank of the block of the cluster it reaches",
                "columns": "the tensor-memory columns it allocates or frees"}
_OPERAND_EXPRS = ("pending", "bytes", "rows", "pitch", "arrivals", "peer", "multicast", "columns")

INSTR_KEYS = {"op", "dst", "src", "addr", "pred", "repeat", "comment"} | ASYNC_KEYS
LOOP_KEYS = {"loop", "var", "body", "comment"}
IF_KEYS = {"if", "then", "else", "comment"}
EXIT_KEYS = {"exit", "comment"}


@attrs.frozen
class AsyncSpec:
    """An asynchronous instruction's operands as written: expressions (None where absent) and the mbarrier's name
    (it may hold {expression} placeholders, resolved like register names). `fixed`: the one AsyncOperands every
    instance shares when nothing depends on the warp, the trip or the repeat."""
    kind: str  # gpusim.isa.opcodes.async_kind, or DSMEM (an LDS / STS / ATOMS with a peer)
    pending: Expr | None
    barrier: str
    nbytes: Expr | None
    rows: Expr | None
    pitch: Expr | None
    arrivals: Expr | None
    fixed: AsyncOperands | None
    where: str  # file:line, for messages about its values
    peer: Expr | None = None
    multicast: Expr | None = None
    columns: Expr | None = None

    def by_key(self) -> dict:
        """The operand expressions by their YAML keys (None where absent)."""
        return {"pending": self.pending, "bytes": self.nbytes, "rows": self.rows, "pitch": self.pitch,
                "arrivals": self.arrivals, "peer": self.peer, "multicast": self.multicast, "columns": self.columns}

    def exprs(self) -> list[Expr]:
        return [e for e in self.by_key().values() if e is not None]


@attrs.frozen
class Instr:
    info: OpInfo
    line: int
    pc: int
    dst: tuple[str, ...]
    src: tuple[str, ...]
    templates: dict  # placeholder text -> compiled Expr, for register names like acc{rep % 4}
    addr: Expr | None
    pred: Expr | None
    repeat: Expr
    templated: bool  # register names contain {expression} placeholders
    template_names: tuple[str, ...]  # the names those placeholders read
    bad_address_bits: int  # address & this != 0 means negative or misaligned
    operands: AsyncSpec | None = None  # asynchronous instructions (cp.async, TMA, mbarriers, wgmma) only

    def control_exprs(self):
        """Expressions whose values shape what the warp issues: a block walker shares them across warps, so the
        asynchronous operands are among them (a value that differs per warp means one walker per warp)."""
        exprs = [e for e in (self.pred, self.repeat) if e is not None]
        return exprs + self.operands.exprs() if self.operands is not None else exprs


@attrs.frozen
class Loop:
    count: Expr
    var: str
    body: tuple
    line: int

    def control_exprs(self):
        return [self.count]


@attrs.frozen
class Reconverge:
    """The reconvergence point after an if's two sides: a BSYNC for the lanes that reach it."""
    pc: int

    def control_exprs(self):
        return []


@attrs.frozen
class If:
    """As Volta and later compile a branch that may diverge: BSSY (set up the convergence barrier), BRA under
    the current mask, the sides, then BSYNC (reconverge) at the end; stack and ITS modes issue the same."""
    cond: Expr
    then: tuple
    orelse: tuple
    line: int
    setup_pc: int  # of the convergence-barrier set-up (BSSY)
    pc: int  # of the divergent branch (BRA)
    reconverge: Reconverge  # the BSYNC after both sides

    def control_exprs(self):
        return [self.cond]


@attrs.frozen
class Exit:
    cond: Expr | None  # None: every active lane exits
    line: int
    pc: int

    def control_exprs(self):
        return [] if self.cond is None else [self.cond]


BRA_INFO = lookup("BRA")
BSSY_INFO = lookup("BSSY")
BSYNC_INFO = lookup("BSYNC")
EXIT_INFO = lookup("EXIT")


def control_names(body) -> tuple[frozenset[str], bool]:
    """Names referenced by control-flow expressions anywhere in `body`, and whether rand() is among them."""
    names: set[str] = set()
    uses_rand = False
    for node in body:
        for e in node.control_exprs():
            names |= e.names
            uses_rand |= e.uses_rand
        for child in _children(node):
            n, r = control_names(child)
            names |= n
            uses_rand |= r
    return frozenset(names), uses_rand


def program_names(body) -> frozenset[str]:
    """Every name any expression of `body` reads: addresses, predicates, repeats, register placeholders and
    control flow."""
    names: set[str] = set()
    for node in body:
        exprs = list(node.control_exprs())
        if isinstance(node, Instr):
            exprs += ([node.addr] if node.addr is not None else []) + list(node.templates.values())
        for e in exprs:
            names |= e.names
        for child in _children(node):
            names |= program_names(child)
    return frozenset(names)


def _children(node):
    if isinstance(node, Loop):
        return [node.body]
    if isinstance(node, If):
        return [node.then, node.orelse]
    return []


def register_placeholders(name: str) -> list[str]:
    """The expressions inside {...} in a register name."""
    return _PLACEHOLDER.findall(name)


class ProgramCompiler:
    """Turns the YAML `program:` list into nodes, checking every name, opcode and key (errors say file:line)."""

    def __init__(self, source: str, known_names: set[str], constants: dict, launch_shape: dict | None = None):
        """`constants`: the parameters' and buffers' values; `launch_shape`: the built-in names the launch fixes
        (nblocks, ntid, grid.x, ...), folded like constants."""
        self.source = source
        self.scopes: list[set[str]] = [set(known_names)]
        self.launch_shape = launch_shape or {}
        self.constants = {**constants, **self.launch_shape}
        self.pc = 0

    def where(self, line: int) -> str:
        return f"{self.source}:{line}"

    def known(self, name: str) -> bool:
        return any(name in scope for scope in self.scopes)

    def expr(self, text, line: int, what: str) -> Expr:
        try:
            iteration = frozenset().union(*self.scopes[1:])  # loop indices in scope and `rep`
            return compile_expr(text, f"{self.where(line)}: {what}", self.known, self.constants, iteration)
        except ExprError as exc:
            raise WorkloadError(str(exc)) from None

    def next_pc(self, slots: int = 1) -> int:
        pc = self.pc
        self.pc += PC_STEP * slots
        return pc

    def body(self, items, line: int, what: str) -> tuple:
        if items is None:
            return ()
        if not isinstance(items, list):
            raise WorkloadError(f"{self.where(line)}: {what}: expected a list of statements, got {shorten(items)}")
        return tuple(self.statement(item, line) for item in items)

    def statement(self, item, parent_line: int):
        if not isinstance(item, LineDict):
            raise WorkloadError(f"{self.where(parent_line)}: expected a statement mapping "
                                f"(op / loop / if / exit), got {shorten(item)}")
        kinds = [k for k in ("op", "loop", "if", "exit") if k in item]
        if len(kinds) != 1:
            raise WorkloadError(f"{self.where(item.line)}: a statement needs exactly one of op, loop, if, exit; "
                                f"got keys {shorten(sorted(map(str, item)))}")
        return {"op": self.instr, "loop": self.loop, "if": self.if_, "exit": self.exit}[kinds[0]](item)

    def check_keys(self, item: LineDict, allowed: set[str], what: str):
        extra = sorted(set(item) - allowed)
        if extra:
            raise WorkloadError(f"{self.where(item.line)}: unknown key {shorten(extra[0])} in {what} "
                                f"(expected {', '.join(sorted(allowed))})")

    def registers(self, value, line: int, key: str) -> tuple[str, ...]:
        if value is None:
            return ()
        regs = [value] if isinstance(value, str) else value
        if not isinstance(regs, list) or not all(isinstance(r, str) for r in regs):
            raise WorkloadError(f"{self.where(line)}: '{key}' must be a register name or a list of them, "
                                f"got {shorten(value)}")
        for reg in regs:
            if not _REG.match(reg):
                raise WorkloadError(f"{self.where(line)}: '{key}': {shorten(reg)} is not a register name "
                                    f"(letters, digits, _ and {{expression}} placeholders)")
            for text in register_placeholders(reg):
                self.templates[text] = self.expr(text, line, f"register '{reg}'")
        # interned: a warp's scoreboard (a dict by name) finds a register by identity, whichever instruction
        # named it
        return tuple(sys.intern(reg) for reg in regs)

    def instr(self, item: LineDict) -> Instr:
        self.check_keys(item, INSTR_KEYS, "an instruction")
        op = item["op"]
        info = lookup(op) if isinstance(op, str) else None
        if info is None:
            raise WorkloadError(f"{self.where(item.line)}: unknown opcode {shorten(op)} "
                                f"(see gpusim.isa.opcodes for the table)")
        addr = item.get("addr")
        kind = async_kind(info)
        if info.is_memory and addr is None:
            raise WorkloadError(f"{self.where(item.line)}: {info.opcode} is a {info.space} memory instruction "
                                f"and needs 'addr'")
        if kind == BULK and addr is None:
            raise WorkloadError(f"{self.where(item.line)}: {info.opcode} copies a tile from global memory and needs "
                                f"'addr' (its first byte)")
        if not info.is_memory and kind != BULK and addr is not None:
            raise WorkloadError(f"{self.where(item.line)}: {info.opcode} does not access memory; remove 'addr'")
        self.scopes.append({"rep"})
        self.templates = {}
        try:
            operands = self.async_operands(item, info, kind)
            repeat = self.expr(item.get("repeat", 1), item.line, "repeat")
            constant = repeat.constant
            if constant is not None and (isinstance(constant, bool) or not isinstance(constant, int) or constant < 0):
                raise WorkloadError(f"{self.where(item.line)}: repeat: expected a whole number >= 0, "
                                    f"got {shorten(constant)}")
            slots = constant if constant is not None else 1
            dst, src = self.registers(item.get("dst"), item.line, "dst"), self.registers(item.get("src"), item.line, "src")
            return Instr(info=info, line=item.line, pc=self.next_pc(max(1, slots)), dst=dst, src=src,
                         templates=dict(self.templates),
                         addr=None if addr is None else self.expr(addr, item.line, "addr"),
                         pred=None if item.get("pred") is None else self.expr(item["pred"], item.line, "pred"),
                         repeat=repeat, templated=any("{" in r for r in dst + src),
                         template_names=tuple(sorted({n for e in self.templates.values() for n in e.names})),
                         bad_address_bits=(info.width - 1 if info.width else 0) | -(1 << 63), operands=operands)
        finally:
            self.scopes.pop()

    def async_operands(self, item: LineDict, info: OpInfo, kind: str | None) -> AsyncSpec | None:
        """The operands of an asynchronous instruction, checked against what its kind takes; None for others
        (which take none of those keys)."""
        where = self.where(item.line)
        if info.base in TCGEN05_MMA and mma_shape(info.opcode) is None:
            raise WorkloadError(f"{where}: {info.opcode}: {TCGEN05_SHAPE_NEEDED}")
        given = sorted(ASYNC_KEYS & item.keys())
        if kind == "" and info.base in DSMEM_OPS and "peer" in item:
            kind = DSMEM  # distributed shared memory: the shared memory of another block of the cluster
        if kind is None:
            forms = {"SYNCS": SYNCS_FORMS, "UTCATOMSWS": UTCATOMSWS_FORMS}.get(info.base, WARPGROUP_FORMS)
            raise WorkloadError(f"{where}: {info.opcode}: expected {forms}")
        if not kind:
            if given:
                raise WorkloadError(f"{where}: {info.opcode} takes no '{given[0]}' (it applies to "
                                    f"{_KEY_USE[given[0]]})")
            return None
        needed, optional = ASYNC_OPERANDS[kind]
        for key in given:
            if key not in needed and key not in optional:
                raise WorkloadError(f"{where}: {info.opcode} takes no '{key}' (it applies to {_KEY_USE[key]})")
        for key in needed:
            if key not in item:
                raise WorkloadError(f"{where}: {info.opcode} needs '{key}' ({_KEY_MEANING[key]})")
        if kind == COPY and item.get("dst") is not None:
            raise WorkloadError(f"{where}: {info.opcode} copies global memory to shared memory and writes no "
                                f"register: remove 'dst'")
        barrier = item.get("barrier", "")
        if "barrier" in item:
            if not isinstance(barrier, str) or not _REG.match(barrier):
                raise WorkloadError(f"{where}: 'barrier': {shorten(barrier)} is not an mbarrier name (letters, "
                                    f"digits, _ and {{expression}} placeholders)")
            for text in register_placeholders(barrier):
                self.templates[text] = self.expr(text, item.line, f"barrier '{barrier}'")
        exprs = {key: self.expr(item[key], item.line, key) if key in item else None for key in _OPERAND_EXPRS}
        fixed = None
        if "{" not in barrier and all(e is None or e.constant is not None for e in exprs.values()):
            fixed = operand_values(exprs, barrier, lambda e: e.constant, where)
        return AsyncSpec(kind=kind, pending=exprs["pending"], barrier=barrier, nbytes=exprs["bytes"],
                         rows=exprs["rows"], pitch=exprs["pitch"], arrivals=exprs["arrivals"], fixed=fixed,
                         where=where, peer=exprs["peer"], multicast=exprs["multicast"], columns=exprs["columns"])

    def loop(self, item: LineDict) -> Loop:
        self.check_keys(item, LOOP_KEYS, "a loop")
        var = item.get("var", "i")
        if not isinstance(var, str) or not re.match(r"[A-Za-z_][A-Za-z0-9_]*\Z", var):
            raise WorkloadError(f"{self.where(item.line)}: loop var must be a name, got {shorten(var)}")
        if var in self.scopes[0]:  # (an enclosing loop's index may be reused: the inner one hides it)
            kind = "the built-in name" if var in self.launch_shape else "a parameter or buffer" if var in self.constants else "the built-in name"
            raise WorkloadError(f"{self.where(item.line)}: loop var '{var}' shadows {kind} '{var}': "
                                f"expected a name of its own")
        count = self.expr(item["loop"], item.line, "loop count")
        constant = count.constant
        whole = type(constant) is int or isinstance(constant, float) and constant.is_integer()
        if constant is not None and not (whole and constant >= 0):
            raise WorkloadError(f"{self.where(item.line)}: loop count: expected a whole number >= 0, "
                                f"got {shorten(constant)} from {shorten(item['loop'])}")
        self.scopes.append({var})
        try:
            body = self.body(item.get("body"), item.line, "loop body")
        finally:
            self.scopes.pop()
        if not body:
            raise WorkloadError(f"{self.where(item.line)}: loop has an empty body")
        return Loop(count=count, var=var, body=body, line=item.line)

    def if_(self, item: LineDict) -> If:
        self.check_keys(item, IF_KEYS, "an if")
        cond = self.expr(item["if"], item.line, "if condition")
        setup_pc, pc = self.next_pc(), self.next_pc()
        then = self.body(item.get("then"), item.line, "then")
        orelse = self.body(item.get("else"), item.line, "else")
        if not then and not orelse:
            raise WorkloadError(f"{self.where(item.line)}: if needs a 'then' or an 'else' body")
        return If(cond=cond, then=then, orelse=orelse, line=item.line, setup_pc=setup_pc, pc=pc,
                  reconverge=Reconverge(self.next_pc()))

    def exit(self, item: LineDict) -> Exit:
        self.check_keys(item, EXIT_KEYS, "an exit")
        cond = None if item["exit"] is True else self.expr(item["exit"], item.line, "exit condition")
        return Exit(cond=cond, line=item.line, pc=self.next_pc())


_MINIMUM = {"pending": 0, "bytes": 1, "rows": 1, "pitch": 0, "arrivals": 1, "peer": 0, "multicast": 1, "columns": 1}
_MAXIMUM = {"peer": 15, "multicast": (1 << 16) - 1}  # a cluster has at most 16 blocks (a rank each)


def operand_values(exprs: dict, barrier: str, value: Callable, where: str) -> AsyncOperands:
    """AsyncOperands from an instruction's operand expressions (key -> Expr or None), each read by `value(expr)`:
    whole numbers at least their minimum; a bulk copy's bytes a whole number of rows."""
    got = {}
    for key, e in exprs.items():
        if e is None:
            continue
        number = value(e)
        if isinstance(number, float) and number.is_integer():
            number = int(number)
        if isinstance(number, bool) or not isinstance(number, int) or number < _MINIMUM[key]:
            raise WorkloadError(f"{e.where}: {shorten(e.text)}: expected a whole number >= {_MINIMUM[key]}, the "
                                f"same for every lane, got {shorten(number)}")
        if number > _MAXIMUM.get(key, number):
            raise WorkloadError(f"{e.where}: {shorten(e.text)}: expected at most {_MAXIMUM[key]} (a cluster has at "
                                f"most 16 blocks), got {shorten(number)}")
        got[key] = number
    rows = got.get("rows", 1)
    nbytes = got.get("bytes", 0)
    if nbytes % rows:
        raise WorkloadError(f"{where}: bytes {nbytes} is not a whole number of {rows} rows")
    return AsyncOperands(pending=got.get("pending", 0), barrier=barrier, nbytes=nbytes, rows=rows,
                         pitch=got.get("pitch", nbytes // rows), arrivals=got.get("arrivals", 0),
                         peer=got.get("peer", -1), multicast=got.get("multicast", 0), columns=got.get("columns", 0))


def walk_instrs(body, fn: Callable[[Instr], None]):
    for node in body:
        if isinstance(node, Instr):
            fn(node)
        for child in _children(node):
            walk_instrs(child, fn)


def program_infos(body) -> list[OpInfo]:
    """The OpInfo of every instruction a program names (implicit branches, reconvergence and exits aside)."""
    infos: list[OpInfo] = []
    walk_instrs(body, lambda node: infos.append(node.info))
    return infos
