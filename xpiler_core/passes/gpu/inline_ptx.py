"""Inline PTX → portable C++ for the instructions whose meaning is known; the rest is unresolved.

PTX is NVIDIA's virtual ISA: hipcc cannot assemble it. Single-instruction ``asm`` statements whose
semantics are simple and documented are rewritten to the equivalent CUDA/HIP C++ (which later passes map
further): ``lop3.b32`` (three-input truth table), ``shfl.sync.{up,down,bfly,idx}.b32`` (with the width and
clamp encoded in the ``c`` operand), ``ld.global.nc`` (read-only cache load → ``__ldg``), ``mov`` of
``%laneid``/``%lanemask_*``, ``bar.sync``, ``membar``, ``fma.rn``/``add``/``sub``/``mul``. Anything else —
multi-instruction blocks, tensor-core ``mma``/``ldmatrix``, ``cp.async``, predicates — is reported as
unresolved at its location with the reason, and left as it was.
"""

from __future__ import annotations

import re
from typing import Any

from tree_sitter import Node

from xpiler_core.diagnostics import Span
from xpiler_core.frontend.source import ParsedSource, parse_text
from xpiler_core.passes.base import PassContext, PassInfo, SourceUnit, Unresolved
from xpiler_core.passes.support.cst import Edit, apply_edits, top_insertion_point, walk

INFO = PassInfo(
    name="inline_ptx",
    summary="Rewrite known inline PTX (lop3, shfl, ld.global.nc, laneid, barriers, fma) to C++; report the rest",
    kind="cst",
    directions=("cuda->hip",),
)

LOP3_HELPER = """// xpiler(inline_ptx): PTX lop3.b32 — bit i of the result is lut[(a_i << 2) | (b_i << 1) | c_i].
__device__ inline unsigned xpiler_lop3(unsigned a, unsigned b, unsigned c, unsigned lut) {
    unsigned r = 0u;
    for (int k = 0; k < 8; ++k)
        if ((lut >> k) & 1u) r |= ((k & 4) ? a : ~a) & ((k & 2) ? b : ~b) & ((k & 1) ? c : ~c);
    return r;
}
"""

LANE = "((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u)"
_LD_TYPES = {"f32": "float", "f64": "double", "s32": "int", "u32": "unsigned int", "b32": "unsigned int",
             "s64": "long long", "u64": "unsigned long long", "b64": "unsigned long long", "s16": "short",
             "u16": "unsigned short", "s8": "signed char", "u8": "unsigned char"}
_SHFL_MODES = {"down": "__shfl_down_sync", "up": "__shfl_up_sync", "bfly": "__shfl_xor_sync", "idx": "__shfl_sync"}
_ARITH = {"add": "+", "sub": "-", "mul": "*"}
_TENSOR = re.compile(r"^(mma|wmma|ldmatrix|stmatrix|wgmma)\b")
_ASYNC = re.compile(r"^(cp\.async|cp\.reduce|mbarrier|fence\.proxy)\b")


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    src = parse_text(module.text, module.path, module.dialect)
    edits: list[Edit] = []
    translated = 0
    needs_lop3 = False
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type != "gnu_asm_expression":
            continue
        statement = node.parent
        ok, outcome = _translate(src, node)
        if not ok:
            ctx.unresolved.append(Unresolved(outcome, Span.of(node), "asm"))
            continue
        if statement is None or statement.type != "expression_statement":
            ctx.unresolved.append(Unresolved("inline PTX used as a value, not a statement", Span.of(node), "asm"))
            continue
        edits.append(Edit(statement.start_byte, statement.end_byte, outcome))
        translated += 1
        needs_lop3 = needs_lop3 or "xpiler_lop3(" in outcome
    if needs_lop3 and "xpiler_lop3(unsigned" not in module.text:
        at = top_insertion_point(src)
        prefix = "\n" if at > 0 and not src.data[:at].endswith(b"\n") else ""
        edits.append(Edit(at, at, prefix + LOP3_HELPER))
    if translated:
        ctx.notes.append(f"inline_ptx: {translated} asm statement(s) rewritten to C++")
    data, _ = apply_edits(src.data, edits)
    return SourceUnit(data.decode("utf-8"), module.dialect, module.path)


def _string_value(src: ParsedSource, node: Node) -> str:
    """The contents of a (possibly concatenated) string literal, escapes for newline/tab decoded."""
    parts: list[str] = []
    literals = [node] if node.type == "string_literal" else [c for c in node.named_children if c.type == "string_literal"]
    for lit in literals:
        raw = src.node_text(lit)
        parts.append(raw[1:-1] if raw.startswith('"') else raw)
    return "".join(parts).replace("\\n", "\n").replace("\\t", " ")


def _operands(src: ParsedSource, node: Node, list_type: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for child in node.children:
        if child.type != list_type:
            continue
        for operand in child.named_children:
            if not operand.type.endswith("_operand"):
                continue
            constraint = next((c for c in operand.named_children if c.type == "string_literal"), None)
            value = operand.child_by_field_name("value")
            if value is None:
                exprs = [c for c in operand.named_children if c.type != "string_literal" and c.type != "identifier"
                         or (c.type == "identifier" and c.prev_sibling is not None and c.prev_sibling.type == "(")]
                value = exprs[-1] if exprs else None
            out.append((_string_value(src, constraint) if constraint else "", src.node_text(value) if value else ""))
    return out


def _translate(src: ParsedSource, node: Node) -> tuple[bool, str]:
    """(True, the replacement statement) or (False, why there is none)."""
    try:
        return True, _replacement(src, node)
    except _NoTranslation as reason:
        return False, str(reason)


class _NoTranslation(Exception):
    pass


def _replacement(src: ParsedSource, node: Node) -> str:
    template_node = next((c for c in node.named_children if c.type in ("string_literal", "concatenated_string")), None)
    if template_node is None:
        raise _NoTranslation("inline asm without a literal template")
    template = _string_value(src, template_node)
    instructions = [i.strip() for i in re.split(r"[;\n]", template) if i.strip()]
    outputs = _operands(src, node, "gnu_asm_output_operand_list")
    inputs = _operands(src, node, "gnu_asm_input_operand_list")
    operands = [v for _, v in outputs] + [v for _, v in inputs]
    if len(instructions) != 1:
        raise _NoTranslation(f"inline PTX block of {len(instructions)} instructions ('{template.strip()[:60]}'): only single known instructions are translated")
    instr = instructions[0].replace("%%", "%")
    if _TENSOR.match(instr.partition(" ")[0]):
        raise _NoTranslation(f"tensor-core PTX '{instr.partition(' ')[0]}' has no automatic HIP translation "
                             "(write it with wmma → rocwmma, or MFMA)")
    if "{" in instr or "@" in instr:
        raise _NoTranslation(f"inline PTX with predicates or scoped registers ('{instr[:60]}') has no automatic translation")
    opcode, _, rest = instr.partition(" ")
    args = [a.strip() for a in rest.split(",")] if rest.strip() else []

    def operand(ref: str) -> str | None:
        match = re.fullmatch(r"%(\d+)", ref.strip())
        if match is None:
            return ref.strip() if re.fullmatch(r"(0x[0-9a-fA-F]+|\d+)", ref.strip()) else None
        index = int(match.group(1))
        if index >= len(operands):
            return None
        value = operands[index].strip()
        return value if re.fullmatch(r"[A-Za-z_]\w*|0x[0-9a-fA-F]+|\d+", value) else f"({value})"

    if _TENSOR.match(opcode):
        raise _NoTranslation(f"tensor-core PTX '{opcode}' has no automatic HIP translation (write it with wmma → rocwmma, or MFMA)")
    if _ASYNC.match(opcode):
        raise _NoTranslation(f"asynchronous-copy PTX '{opcode}' has no HIP equivalent on gfx90a")
    if opcode == "lop3.b32" and len(args) == 5:
        d, a, b, c, lut = (operand(x) for x in args)
        if None in (d, a, b, c, lut):
            raise _NoTranslation(f"lop3 with operands the pass cannot read: '{instr}'")
        return f"{d} = xpiler_lop3({a}, {b}, {c}, {lut});"
    shfl = re.fullmatch(r"shfl(?:\.sync)?\.(up|down|bfly|idx)\.b32", opcode)
    if shfl and len(args) in (4, 5):
        d, a, b, c = (operand(x) for x in args[:4])
        mask = operand(args[4]) if len(args) == 5 else "0xffffffff"
        if None in (d, a, b, c, mask) or "|" in args[0]:
            raise _NoTranslation(f"shfl with operands the pass cannot read: '{instr}'")
        c_value = _int_literal(c or "")
        if c_value is None:
            raise _NoTranslation(f"shfl whose clamp/segment operand is not a constant: '{instr}'")
        width = 32 - ((c_value >> 8) & 0x1F)
        clamp = c_value & 0x1F
        expected_clamp = 0 if shfl.group(1) == "up" else 0x1F
        if clamp != expected_clamp or width not in (1, 2, 4, 8, 16, 32):
            raise _NoTranslation(f"shfl with clamp {clamp:#x} / width {width}: no C++ shuffle with that meaning")
        return f"{d} = {_SHFL_MODES[shfl.group(1)]}({mask}, {a}, {b}, {width});"
    ld = re.fullmatch(r"ld\.global\.nc(?:\.L1::no_allocate)?\.([a-z]\d+)", opcode)
    if ld and len(args) == 2:
        ctype = _LD_TYPES.get(ld.group(1))
        d = operand(args[0])
        addr = re.fullmatch(r"\[\s*(%\d+)\s*\]", args[1])
        ptr = operand(addr.group(1)) if addr else None
        if ctype is None or d is None or ptr is None:
            raise _NoTranslation(f"ld.global.nc form the pass cannot read: '{instr}'")
        return f"{d} = __ldg(reinterpret_cast<const {ctype}*>({ptr}));"
    mov = re.fullmatch(r"mov\.[ub]32", opcode)
    if mov and len(args) == 2:
        d = operand(args[0])
        special = args[1]
        values = {"%laneid": LANE, "%lanemask_lt": f"((1u << {LANE}) - 1u)",
                  "%lanemask_le": f"((2u << {LANE}) - 1u)", "%lanemask_eq": f"(1u << {LANE})",
                  "%lanemask_gt": f"(~((2u << {LANE}) - 1u))", "%lanemask_ge": f"(~((1u << {LANE}) - 1u))"}
        if d is not None and special in values:
            return f"{d} = {values[special]};"
        raise _NoTranslation(f"PTX special register '{special}' has no automatic translation")
    if opcode in ("bar.sync", "barrier.sync", "bar.sync.aligned", "barrier.sync.aligned") and args in ([], ["0"]):
        return "__syncthreads();"
    fences = {"membar.gl": "__threadfence();", "membar.cta": "__threadfence_block();",
              "membar.sys": "__threadfence_system();", "fence.acq_rel.gpu": "__threadfence();"}
    if opcode in fences and not args:
        return fences[opcode]
    if opcode in ("fma.rn.f32", "fma.rn.f64") and len(args) == 4:
        d, a, b, c = (operand(x) for x in args)
        if None not in (d, a, b, c):
            fn = "__fmaf_rn" if opcode.endswith("f32") else "__fma_rn"
            return f"{d} = {fn}({a}, {b}, {c});"
    arith = re.fullmatch(r"(add|sub|mul)(?:\.lo)?\.(f32|s32|u32)", opcode)
    if arith and len(args) == 3:
        d, a, b = (operand(x) for x in args)
        if None not in (d, a, b):
            return f"{d} = {a} {_ARITH[arith.group(1)]} {b};"
    raise _NoTranslation(f"inline PTX '{instr[:60]}' has no known HIP equivalent")


def _int_literal(text: str) -> int | None:
    text = text.strip().strip("()")
    try:
        return int(text, 0)
    except ValueError:
        return None
