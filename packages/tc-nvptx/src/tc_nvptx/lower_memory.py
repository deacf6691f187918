"""Global memory: vectorized, predicated loads and stores, and atomics.

A thread's elements along the fastest dimension are grouped into vectors of up to 128 bits, as
wide as contiguity and alignment allow. Without a mask a vector is a plain LLVM vector access.
With a mask known constant over the vector (alignment analysis), one predicated
ld.global.v4/st.global.v4 (inline PTX) does it. Otherwise the code tests "all lanes in bounds":
the common case takes the unpredicated vector access, and only a partially masked vector falls
back to per-element predicated accesses. Masked-off lanes never touch memory and loads give
`other` there.
"""

from __future__ import annotations

import llvmlite.ir as ir
from tc_ir.ops import AtomicCASOp, AtomicRMWOp, BinaryOp, LoadOp, Operation, StoreOp, Value
from tc_ir.types import F32 as F32_IR
from tc_ir.types import PointerType, ScalarType, TileType, element_of

from .context import Ctx, TileVal, lowering_error
from .layout_math import ThreadMap
from .llvm_types import F32, I1, I8, I16, I32, I64, bits_of, join, llvm_type, memory_type

Key = tuple[int, ...]


def _pointee(op: Operation) -> ScalarType:
    """The element type `op` loads or stores; pointers (a table of pointers read with `*pp`)
    are refused at the access, since the GPU code generator has no 64-bit pointer loads."""
    pt = element_of(op.operands[0].type)
    assert isinstance(pt, PointerType)
    pe = pt.pointee
    if not isinstance(pe, ScalarType):
        what = "load a pointer from" if isinstance(op, LoadOp) else "store a pointer to"
        raise lowering_error(f"the GPU code generator cannot {what} memory", op.loc, hint="pass the pointers as kernel parameters, or "
                             "offsets from one base pointer")
    return pe


def vector_width(ctx: Ctx, ptr: Value, m: ThreadMap, elem: ScalarType) -> int:
    """Elements per access: contiguous in the thread, in memory, aligned, at most 128 bits."""
    if not m.dims:
        return 1
    f = m.order[0]
    d = m.dims[f]
    run = d.spt if d.mode in ("wrap", "tile") else d.size if d.mode == "all" else 1
    info = ctx.axes.info(ptr)
    eb = max(1, bits_of(elem) // 8)
    vec = min(run, info.contiguity[f], max(1, info.divisibility[f] // eb), max(1, 16 // eb))
    p = 1
    while p * 2 <= vec:
        p *= 2
    return p


def vector_dim(ctx: Ctx, ptr: Value, m: ThreadMap, elem: ScalarType) -> tuple[int, int]:
    """(dimension, elements per access) of the widest access any dimension allows: a thread's run
    of consecutive elements need not lie along the layout's fastest dimension (a transposition's
    layouts hold 2-D blocks, vectorized along the dimension memory is contiguous in)."""
    if not m.dims:
        return 0, 1
    info = ctx.axes.info(ptr)
    eb = max(1, bits_of(elem) // 8)
    best = (m.order[0], 1)
    for f in m.order:
        d = m.dims[f]
        run = d.spt if d.mode in ("wrap", "tile") else d.size if d.mode == "all" else 1
        vec = min(run, info.contiguity[f], max(1, info.divisibility[f] // eb), max(1, 16 // eb))
        p = 1
        while p * 2 <= vec:
            p *= 2
        if p > best[1]:
            best = (f, p)
    return best


def mask_uniform(ctx: Ctx, mask: Value | None, m: ThreadMap, vec: int, dim: int | None = None) -> bool:
    if mask is None or not isinstance(mask.type, TileType) or not m.dims:
        return True
    return ctx.axes.info(mask).constancy[m.order[0] if dim is None else dim] >= vec


def chunks(m: ThreadMap, vec: int, dim: int | None = None) -> list[list[Key]]:
    """The thread's keys grouped into vectors along `dim` (default: the fastest dimension)."""
    if not m.dims:
        return [[()]]
    f = m.order[0] if dim is None else dim
    out = []
    for key in m.keys:
        if key[f] % vec == 0:
            out.append([key[:f] + (key[f] + i,) + key[f + 1 :] for i in range(vec)])
    return out


def _word(bits: int) -> tuple[ir.Type, str, str]:
    """LLVM type, PTX type suffix and asm constraint of one access word."""
    if bits == 64:
        return I64, "b64", "l"
    if bits == 32:
        return I32, "b32", "r"
    if bits == 16:
        return I16, "b16", "h"
    return I16, "u8", "h"


def _words(vec: int, elem_bits: int) -> tuple[int, int]:
    """(number of words, bits per word) of a vector access."""
    total = vec * elem_bits
    if elem_bits >= 32:
        return vec, elem_bits
    if total >= 32:
        return total // 32, 32
    return vec, elem_bits


def _to_words(ctx: Ctx, vals: list[ir.Value], elem: ScalarType, nwords: int, wbits: int) -> list[ir.Value]:
    b = ctx.b
    mt = memory_type(elem)
    mem = [b.zext(v, I8) if elem.name == "i1" else v for v in vals]
    wty = _word(wbits)[0]
    if nwords == len(mem):
        out = []
        for v in mem:
            iv = b.bitcast(v, ir.IntType(bits_of(elem))) if not isinstance(v.type, ir.IntType) else v
            out.append(b.zext(iv, wty) if wbits == 16 and bits_of(elem) == 8 else iv)
        return out
    per = len(mem) // nwords
    out = []
    for w in range(nwords):
        vec: ir.Value = ir.Constant(ir.VectorType(mt, per), None)
        for i in range(per):
            vec = b.insert_element(vec, mem[w * per + i], ir.Constant(I32, i))
        out.append(b.bitcast(vec, wty))
    return out


def _from_words(ctx: Ctx, words: list[ir.Value], elem: ScalarType, vec: int, wbits: int) -> list[ir.Value]:
    b = ctx.b
    mt = memory_type(elem)
    if len(words) == vec:
        out = []
        for w in words:
            if bits_of(elem) == 8 and wbits != 8:
                w = b.trunc(w, I8)
            elif bits_of(elem) == 8:
                w = b.trunc(w, I8)
            out.append(w if w.type == mt else b.bitcast(w, mt))
    else:
        per = vec // len(words)
        out = []
        for w in words:
            v = b.bitcast(w, ir.VectorType(mt, per))
            out.extend(b.extract_element(v, ir.Constant(I32, i)) for i in range(per))
    if elem.name == "i1":
        out = [b.icmp_unsigned("!=", v, ir.Constant(I8, 0)) for v in out]
    return out


def _asm_load(
    ctx: Ctx, ptr: ir.Value, pred: ir.Value, others: list[ir.Value], nwords: int, wbits: int
) -> list[ir.Value]:
    wty, suffix, cons = _word(wbits)
    movs = " ".join(f"mov.b{16 if wbits == 8 else wbits} ${i}, ${nwords + 2 + i};" for i in range(nwords))
    if nwords == 1:
        dst = "$0"
        v = ""
    else:
        dst = "{" + ", ".join(f"${i}" for i in range(nwords)) + "}"
        v = f".v{nwords}"
    text = f"{movs} @${nwords + 1} ld.global{v}.{suffix} {dst}, [ ${nwords} + 0 ];"
    constraints = ",".join([f"={cons}"] * nwords + ["l", "b"] + [cons] * nwords)
    ret: ir.Type = wty if nwords == 1 else ir.LiteralStructType([wty] * nwords)
    r = ctx.asm(ret, text, constraints, [ptr, pred, *others], side_effect=True)
    if nwords == 1:
        return [r]
    return [ctx.b.extract_value(r, i) for i in range(nwords)]


def _asm_store(ctx: Ctx, ptr: ir.Value, pred: ir.Value, words: list[ir.Value], wbits: int) -> None:
    _wty, suffix, cons = _word(wbits)
    n = len(words)
    src = "$2" if n == 1 else "{" + ", ".join(f"${2 + i}" for i in range(n)) + "}"
    v = "" if n == 1 else f".v{n}"
    text = f"@$1 st.global{v}.{suffix} [ $0 + 0 ], {src};"
    constraints = ",".join(["l", "b"] + [cons] * n) + ",~{memory}"
    ctx.asm(ir.VoidType(), text, constraints, [ptr, pred, *words], side_effect=True)


def _plain_load(ctx: Ctx, ptr: ir.Value, elem: ScalarType, vec: int, volatile: bool) -> list[ir.Value]:
    b = ctx.b
    mt = memory_type(elem)
    eb = max(1, bits_of(elem) // 8)
    if vec == 1:
        v = b.load(ptr, typ=mt, align=eb)
        if volatile:
            v.volatile = True  # type: ignore[attr-defined]
        vals = [v]
    else:
        vt = ir.VectorType(mt, vec)
        v = b.load(ptr, typ=vt, align=vec * eb)
        vals = [b.extract_element(v, ir.Constant(I32, i)) for i in range(vec)]
    if elem.name == "i1":
        vals = [b.icmp_unsigned("!=", x, ir.Constant(I8, 0)) for x in vals]
    return vals


def _plain_store(ctx: Ctx, ptr: ir.Value, elem: ScalarType, vals: list[ir.Value]) -> None:
    b = ctx.b
    mt = memory_type(elem)
    eb = max(1, bits_of(elem) // 8)
    mem = [b.zext(v, I8) if elem.name == "i1" else v for v in vals]
    if len(mem) == 1:
        b.store(mem[0], ptr, align=eb)
        return
    vec: ir.Value = ir.Constant(ir.VectorType(mt, len(mem)), None)
    for i, v in enumerate(mem):
        vec = b.insert_element(vec, v, ir.Constant(I32, i))
    b.store(vec, ptr, align=len(mem) * eb)


def _all(ctx: Ctx, preds: list[ir.Value]) -> ir.Value:
    acc = preds[0]
    for p in preds[1:]:
        acc = ctx.b.and_(acc, p)
    return acc


def _get(ctx: Ctx, v: Value | None, key: Key) -> ir.Value | None:
    if v is None:
        return None
    x = ctx.values[v]
    return x.vals[key] if isinstance(x, TileVal) else x  # type: ignore[return-value]


def load_vector(
    ctx: Ctx, op: LoadOp, ptrs: list[ir.Value], masks: list[ir.Value] | None,
    others: list[ir.Value], elem: ScalarType, uniform: bool,
) -> list[ir.Value]:
    """One vector of a load: plain, predicated as a whole, or tested for all-in-bounds."""
    vec = len(ptrs)
    if masks is None:
        return _plain_load(ctx, ptrs[0], elem, vec, op.volatile)
    nwords, wbits = _words(vec, bits_of(elem))
    if uniform:
        words = _asm_load(ctx, ptrs[0], masks[0], _to_words(ctx, others, elem, nwords, wbits), nwords, wbits)
        return _from_words(ctx, words, elem, vec, wbits)
    b = ctx.b
    every = _all(ctx, masks)
    fast_bb = b.append_basic_block("vec_load")
    slow_bb = b.append_basic_block("masked_load")
    join_bb = b.append_basic_block("load_done")
    b.cbranch(every, fast_bb, slow_bb)
    b.position_at_end(fast_bb)
    fast = _plain_load(ctx, ptrs[0], elem, vec, op.volatile)
    fast_end = b.block
    b.branch(join_bb)
    b.position_at_end(slow_bb)
    n1, w1 = _words(1, bits_of(elem))
    slow = []
    for p, m, o in zip(ptrs, masks, others):
        w = _asm_load(ctx, p, m, _to_words(ctx, [o], elem, n1, w1), n1, w1)
        slow.extend(_from_words(ctx, w, elem, 1, w1))
    slow_end = b.block
    b.branch(join_bb)
    b.position_at_end(join_bb)
    return join(b, fast, fast_end, slow, slow_end)


def lower_load(ctx: Ctx, op: LoadOp) -> None:
    ptr = op.operands[0]
    mask = op.operands[1] if len(op.operands) > 1 else None
    other = op.operands[2] if len(op.operands) > 2 else None
    elem = _pointee(op)
    t = op.result.type
    zero = ir.Constant(llvm_type(elem), None)
    if not isinstance(t, TileType):
        p = ctx.scalar(ptr)
        masks = [ctx.scalar(mask)] if mask is not None else None
        others = [ctx.scalar(other) if other is not None else zero]
        ctx.values[op.result] = load_vector(ctx, op, [p], masks, others, elem, True)[0]
        return
    pv = ctx.tile(ptr)
    m = pv.map
    dim, vec = vector_dim(ctx, ptr, m, elem)
    uniform = mask_uniform(ctx, mask, m, vec, dim)
    add = _accumulating_add(ctx, op, elem, mask)
    if add is not None:
        ctx.values[add.result] = _load_and_add(ctx, add, op, pv.vals, chunks(m, vec, dim))
        ctx.lowered_early.add(add)
        return
    vals: dict[Key, ir.Value] = {}
    for keys in chunks(m, vec, dim):
        ptrs = [pv.vals[k] for k in keys]
        masks = [_get(ctx, mask, k) for k in keys] if mask is not None else None
        others = [(_get(ctx, other, k) if other is not None else zero) for k in keys]
        res = load_vector(ctx, op, ptrs, masks, others, elem, uniform)  # type: ignore[arg-type]
        vals.update(zip(keys, res))
    ctx.values[op.result] = TileVal(ctx.map_of(t), vals, t.element)


def _accumulating_add(ctx: Ctx, op: LoadOp, elem: ScalarType, mask: Value | None) -> BinaryOp | None:
    """The float addition that is the one use of an unmasked f32 tile load `op`, when it can be
    done as each vector arrives: in the same block, only ops without effects between, the other
    operand already lowered, every type the same (so the same elements per thread).

    A partial sum read back into an accumulator (`acc += *partial` of split-K or stream-K) is
    then added vector by vector, and the loaded tile never sits in registers beside the whole
    accumulator. As a load and an add, LLVM's back end put every load first: 128 + 128 registers
    per thread for a 128x256 accumulator over 8 warps, and ptxas spilled."""
    block = op.parent
    users = ctx.users_of(op.result)
    if block is None or len(users) != 1 or mask is not None or op.volatile or elem.name != "f32":
        return None
    add = users[0]
    if not (isinstance(add, BinaryOp) and add.kind == "fadd" and add.parent is block):
        return None
    if any(v.type != op.result.type for v in (*add.operands, add.result)) or add.operands[0] is add.operands[1]:
        return None
    if not isinstance(ctx.values.get(_other_operand(add, op.result)), TileVal):
        return None
    ops = block.ops
    between = ops[ops.index(op) + 1 : ops.index(add)]
    return None if any(o.HAS_SIDE_EFFECTS or o.regions for o in between) else add


def _other_operand(add: BinaryOp, v: Value) -> Value:
    return add.operands[1] if add.operands[0] is v else add.operands[0]


#: Elements a thread loads in one asm statement of _asm_load_add before adding them: that many
#: loads are in flight at once, for that many registers more (one vector per statement put every
#: load's whole latency in a row: 64 round trips for a 128x256 float tile over 8 warps).
LOAD_AND_ADD_BATCH = 16


def _load_and_add(ctx: Ctx, add: BinaryOp, load: LoadOp, ptrs: dict[Key, ir.Value],
                  vectors: list[list[Key]]) -> TileVal:
    """`add`'s result: the loaded vectors added to the other operand as they arrive
    (_asm_load_add), so that no scheduler can gather all the loads first (see
    _accumulating_add)."""
    acc = ctx.values[_other_operand(add, load.result)]
    assert isinstance(acc, TileVal)
    t = add.result.type
    assert isinstance(t, TileType)
    return TileVal(ctx.map_of(t), _asm_load_add(ctx, acc.vals, ptrs, vectors), t.element)


def _asm_load_add(ctx: Ctx, acc: dict[Key, ir.Value], ptrs: dict[Key, ir.Value],
                  vectors: list[list[Key]]) -> dict[Key, ir.Value]:
    """acc + the f32 vectors at ptrs (one pointer per vector, at its first key): inline-asm
    statements that each load a batch of vectors (up to LOAD_AND_ADD_BATCH elements) and then
    add them, so that a batch's loads overlap and the loaded values never all sit in registers."""
    sums: dict[Key, ir.Value] = {}
    batches: list[list[list[Key]]] = []
    for keys in vectors:
        if not batches or sum(len(k) for k in batches[-1]) + len(keys) > LOAD_AND_ADD_BATCH:
            batches.append([])
        batches[-1].append(keys)
    for batch in batches:
        flat = [k for keys in batch for k in keys]
        n = len(flat)
        temps = [f"%tc_t{i}" for i in range(n)]
        loads, at = [], 0
        for j, keys in enumerate(batch):
            group = temps[at:at + len(keys)]
            dst = group[0] if len(keys) == 1 else "{" + ", ".join(group) + "}"
            v = "" if len(keys) == 1 else f".v{len(keys)}"
            loads.append(f"ld.global{v}.f32 {dst}, [ ${2 * n + j} + 0 ];")
            at += len(keys)
        adds = " ".join(f"add.rn.f32 ${i}, ${n + i}, %tc_t{i};" for i in range(n))
        text = f"{{ .reg .f32 {', '.join(temps)}; {' '.join(loads)} {adds} }}"
        constraints = ",".join(["=f"] * n + ["f"] * n + ["l"] * len(batch))
        ret: ir.Type = F32 if n == 1 else ir.LiteralStructType([F32] * n)
        r = ctx.asm(ret, text, constraints, [*(acc[k] for k in flat), *(ptrs[keys[0]] for keys in batch)],
                    side_effect=True)
        sums.update(zip(flat, [r] if n == 1 else [ctx.b.extract_value(r, i) for i in range(n)]))
    return sums


def _partial_chunks(ctx: Ctx, op: Operation, t: TileType) -> tuple[list[list[Key]], dict[Key, ir.Value]]:
    """A partial sum's register chunks (vectors of 4 where they divide) and the address of each
    in slot `slot` of the workspace: chunk c of thread t at partials + slot * numel +
    (c * threads + t) * vector elements (tc.partial_store: coalesced whatever the layout)."""
    m = ctx.map_of(t)
    keys = list(m.keys)
    threads = 32 * ctx.options.num_warps
    if len(keys) * threads != t.numel or len(set(keys)) != len(keys):
        raise lowering_error(f"internal error: a partial sum of {t} is not one element per register", op.loc)
    vec = 4 if len(keys) % 4 == 0 else (2 if len(keys) % 2 == 0 else 1)
    b = ctx.b
    slot = b.mul(ctx.scalar(op.operands[1]), ir.Constant(I32, t.numel))
    start = b.add(slot, b.mul(ctx.tid, ir.Constant(I32, vec)))
    base = b.gep(ctx.scalar(op.operands[0]), [b.sext(start, I64)], source_etype=F32)
    chunks = [keys[i:i + vec] for i in range(0, len(keys), vec)]
    ptrs = {c[0]: b.gep(base, [ir.Constant(I64, j * vec * threads)], source_etype=F32) if j else base
            for j, c in enumerate(chunks)}
    return chunks, ptrs


def lower_partial_store(ctx: Ctx, op: Operation) -> None:
    t = op.operands[2].type
    assert isinstance(t, TileType)
    chunks, ptrs = _partial_chunks(ctx, op, t)
    tile = ctx.tile(op.operands[2])
    for keys in chunks:
        _plain_store(ctx, ptrs[keys[0]], F32_IR, [tile.vals[k] for k in keys])


def lower_partial_add(ctx: Ctx, op: Operation) -> None:
    t = op.results[0].type
    assert isinstance(t, TileType)
    chunks, ptrs = _partial_chunks(ctx, op, t)
    acc = ctx.tile(op.operands[2])
    ctx.values[op.results[0]] = TileVal(acc.map, _asm_load_add(ctx, acc.vals, ptrs, chunks), t.element)


def store_vector(
    ctx: Ctx, ptrs: list[ir.Value], vals: list[ir.Value], masks: list[ir.Value] | None,
    elem: ScalarType, uniform: bool,
) -> None:
    vec = len(ptrs)
    if masks is None:
        _plain_store(ctx, ptrs[0], elem, vals)
        return
    nwords, wbits = _words(vec, bits_of(elem))
    if uniform:
        _asm_store(ctx, ptrs[0], masks[0], _to_words(ctx, vals, elem, nwords, wbits), wbits)
        return
    b = ctx.b
    every = _all(ctx, masks)
    with b.if_else(every) as (fast, slow):
        with fast:
            _plain_store(ctx, ptrs[0], elem, vals)
        with slow:
            n1, w1 = _words(1, bits_of(elem))
            for p, v, mk in zip(ptrs, vals, masks):
                _asm_store(ctx, p, mk, _to_words(ctx, [v], elem, n1, w1), w1)


def lower_store(ctx: Ctx, op: StoreOp) -> None:
    """A store done by one thread per element: thread 0 for a scalar, the owning replica of a
    tile element that several threads hold.

    Why not every holder: the program is one thread of the language, so `*c = *c + 1` reads
    before it writes; were every warp to store, a warp that loads late could read another warp's
    store and add its own increment again (seen on an H200: a counter guarded by a spin lock
    came out larger than the sum of its increments)."""
    ptr, value = op.operands[0], op.operands[1]
    mask = op.operands[2] if len(op.operands) > 2 else None
    elem = _pointee(op)
    b = ctx.b
    if not isinstance(ptr.type, TileType):
        pred = ctx.thread0()
        if mask is not None:
            pred = b.and_(pred, ctx.scalar(mask))
        v = ctx.values[value]
        if isinstance(v, TileVal):
            v = next(iter(v.vals.values()))
        store_vector(ctx, [ctx.scalar(ptr)], [v], [pred], elem, True)  # type: ignore[list-item]
        return
    pv = ctx.tile(ptr)
    m = pv.map
    owner = ctx.owner(m)
    replicated = not (isinstance(owner, ir.Constant) and owner.constant == 1)
    dim, vec = vector_dim(ctx, ptr, m, elem)
    uniform = mask_uniform(ctx, mask, m, vec, dim)
    for keys in chunks(m, vec, dim):
        ptrs = [pv.vals[k] for k in keys]
        vals = [_get(ctx, value, k) for k in keys]
        masks: list[ir.Value] | None = None
        if mask is not None:
            masks = [_get(ctx, mask, k) for k in keys]  # type: ignore[misc]
            if replicated:
                masks = [b.and_(owner, mk) for mk in masks]
        elif replicated:
            masks = [owner] * len(keys)
        store_vector(ctx, ptrs, vals, masks, elem, uniform or mask is None)  # type: ignore[arg-type]


_RMW = {"add": "add", "fadd": "fadd", "max": "max", "umax": "umax", "fmax": "fmax", "min": "min",
        "umin": "umin", "fmin": "fmin", "and": "and", "or": "or", "xor": "xor", "xchg": "xchg"}  # fmt: skip


#: Atomics acquire and release (Triton's default, acq_rel): a spin lock built from atomic_cas and
#: atomic_xchg then orders the plain loads and stores between them (with relaxed atomics the
#: H100 let programs read a stale counter inside the lock).
_ORDERING = "acq_rel"
#: ... among the threads of the GPU (LLVM's syncscope "device", PTX's .gpu; Triton's default
#: scope, and CUDA's atomicAdd's): the programs of a launch and the launches after it. LLVM's
#: default, the system, made every fence a `fence.acq_rel.sys`, which also orders the stores
#: before it for the host and other GPUs, a wider wait than any kernel here needs (measured on
#: an H100, the stream-K tf32 matmul's cycles barely moved: 592.4 k -> 591.9 k at 4096^3).
_SCOPE = "device"
#: (llvmlite's cmpxchg takes no scope: it writes the ordering where LLVM reads the scope first)
_SCOPED_ORDERING = f'syncscope("{_SCOPE}") {_ORDERING}'


def _atomic_one(ctx: Ctx, op: Operation, ptr: ir.Value, args: list[ir.Value], pred: ir.Value | None) -> ir.Value:
    """One element's atomic, done only where pred holds (result: the old value, else 0)."""
    b = ctx.b
    ty = args[-1].type

    def do() -> ir.Value:
        if isinstance(op, AtomicRMWOp):
            kind = _RMW.get(op.kind)
            if kind is None:
                raise lowering_error(f"unknown atomic {op.kind}", op.loc)
            return b.atomic_rmw(kind, ptr, args[0], _SCOPED_ORDERING)
        cmp, new = args
        if not isinstance(ty, ir.IntType):
            # cmpxchg takes integers only: compare and swap the bits (atom.cas.b32), as the
            # interpreter does (-0.0 differs from 0.0, a NaN matches its own bits)
            ity = ir.IntType(bits_of(element_of(op.results[0].type)))
            cmp, new = b.bitcast(cmp, ity), b.bitcast(new, ity)
            r = b.cmpxchg(ptr, cmp, new, _SCOPED_ORDERING, "acquire")
            return b.bitcast(b.extract_value(r, 0), ty)
        r = b.cmpxchg(ptr, cmp, new, _SCOPED_ORDERING, "acquire")
        return b.extract_value(r, 0)

    if pred is None:
        return do()
    before = b.block
    then_bb = b.append_basic_block("atomic")
    join_bb = b.append_basic_block("atomic_done")
    b.cbranch(pred, then_bb, join_bb)
    b.position_at_end(then_bb)
    r = do()
    then_end = b.block
    b.branch(join_bb)
    b.position_at_end(join_bb)
    phi = b.phi(ty)
    phi.add_incoming(r, then_end)
    phi.add_incoming(ir.Constant(ty, None), before)
    return phi


def lower_atomic(ctx: Ctx, op: Operation) -> None:
    # LLVM's NVPTX back end keeps the ordering of cmpxchg but emits read-modify-write atomics as
    # relaxed: fences around the op make each of them acquire-release as a whole
    ctx.b.fence(_ORDERING, _SCOPE)
    _lower_atomic(ctx, op)
    ctx.b.fence(_ORDERING, _SCOPE)


def _lower_atomic(ctx: Ctx, op: Operation) -> None:
    ptr = op.operands[0]
    nargs = 2 if isinstance(op, AtomicCASOp) else 1
    args_v = op.operands[1 : 1 + nargs]
    mask = op.operands[1 + nargs] if len(op.operands) > 1 + nargs else None
    if isinstance(ptr.type, TileType):
        pv = ctx.tile(ptr)
        owner = ctx.owner(pv.map)
        vals = {}
        for key in pv.map.keys:
            pred = owner
            mk = _get(ctx, mask, key)
            if mk is not None:
                pred = ctx.b.and_(pred, mk)
            args = [_get(ctx, a, key) for a in args_v]
            vals[key] = _atomic_one(ctx, op, pv.vals[key], args, pred)  # type: ignore[arg-type]
        t = op.result.type
        assert isinstance(t, TileType)
        ctx.values[op.result] = TileVal(ctx.map_of(t), vals, t.element)
        return
    # a scalar atomic: thread 0 does it, the old value is broadcast through shared memory. The
    # program is one thread of the language: the barrier first makes every thread's earlier
    # stores part of what thread 0's atomic releases (a lock released by atomic_xchg after a
    # plain update of the data it guards, as in a spin lock)
    ctx.barrier()
    pred = ctx.thread0()
    if mask is not None:
        pred = ctx.b.and_(pred, ctx.scalar(mask))
    old = _atomic_one(ctx, op, ctx.scalar(ptr), [ctx.scalar(a) for a in args_v], pred)
    if op.results and op.results[0] in _used_results(ctx):
        slot = ctx.smem_ptr(op)  # (between two barriers: every thread reads it before the next use)
        ctx.barrier()
        with ctx.b.if_then(ctx.thread0()):
            ctx.b.store(old, slot)
        ctx.barrier()
        old = ctx.b.load(slot, typ=old.type)
    ctx.values[op.result] = old


def _used_results(ctx: Ctx) -> set[Value]:
    key = "__used"
    cache = getattr(ctx, "_used_cache", None)
    if cache is None:
        cache = {v for o in ctx.function.walk() for v in o.operands}
        ctx._used_cache = cache  # type: ignore[attr-defined]
    del key
    return cache


def _register() -> None:
    from .lowerings import LOWERINGS

    LOWERINGS["tc.load"] = lower_load
    LOWERINGS["tc.store"] = lower_store
    LOWERINGS["tc.atomic_rmw"] = lower_atomic
    LOWERINGS["tc.atomic_cas"] = lower_atomic
    LOWERINGS["tc.partial_store"] = lower_partial_store
    LOWERINGS["tc.partial_add"] = lower_partial_add


_register()
__all__ = ["I1", "lower_load", "lower_store"]
