"""The programs that compute-sanitizer watches in tools/gpu_check.py: any out-of-bounds or
misaligned access (--tool memcheck), a race on shared memory (--tool racecheck) or a misused
barrier (--tool synccheck) in them is reported by it.

    python3 tools/sanitize_kernels.py            # the tutorial kernels at small, ragged sizes
    python3 tools/sanitize_kernels.py --matmul [--shard I/N] [--persistent]
                                                 # tc_torch.matmul, each configuration alone

The first runs each tutorial kernel of the GPU-vs-interpreter catalogue once. The second runs
every configuration that tc_torch.matmul's auto-tuner may choose (the 16-bit list and both tf32
lists, with their persistent, bulk-store, warp-specialized, overlapped, multicast and stream-K
schedules; the stream-K kernel of kernels/matmul_streamk.tc) forced one at a time through
`matmul_out(configs=[...])`, in the four operand layouts, at three shapes: one whose extents
are ragged against every tile but whose rows are 16-byte aligned, C's too (the TMA loads and bulk
stores; more programs than SMs, so that the persistent kernels loop), a batched one of odd
extents (no TMA), and the first with C's rows not 16-byte aligned (TMA loads, no bulk store). A configuration that needs more shared memory than the GPU has in some layout
is reported as such and passed over there, as the auto-tuner passes it over. `--shard I/N` runs
every N-th case from the I-th (gpu_check compiles the cases in parallel shards before the
sanitizer runs find them in the disk cache); `--persistent` only the persistent configurations
with A not transposed (racecheck takes seconds a case); `--shape I` only MATMUL_SHAPES[I] and
`--match TEXT` only the cases whose label contains TEXT. Both modes print one line per case and
exit 1 on a wrong result.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "packages" / "tc-nvptx" / "tests"))

TUTORIAL = {"vector_add", "softmax", "transpose_masked", "matmul_tutorial", "matmul_autotuned", "transpose"}

#: (batch, M, N, K, operands' rows aligned): the matmul shapes (see the module docstring); C is
#: contiguous, so its rows are 16-byte aligned in the first only (the third's bulk stores fall
#: back to the epilogue exchanged in rounds of columns, tc_opt.exchange_rounds).
MATMUL_SHAPES = ((1, 1700, 4160, 200, True), (2, 203, 137, 999, False), (1, 1700, 4100, 200, True))


def tutorial_kernels() -> int:
    """Each tutorial kernel once on the GPU and on the interpreter; the number of mismatches."""
    import numpy as np
    import torch

    import nvptx_catalogue as cat
    import tc_runtime as tc

    failed = 0
    for case in cat.all_cases():
        base = case.name.split("[")[0]
        if base not in TUTORIAL or case.make is None:
            continue
        launch = case.make(np.random.default_rng(1), "odd")
        args: list[Any] = [torch.from_numpy(a).cuda() if isinstance(a, np.ndarray) else a for a in launch.args]
        ref = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in launch.args]
        tc.kernel(case.source, device="cuda", defines=case.defines)(*args, grid=launch.grid)
        tc.kernel(case.source, device="cpu", defines=case.defines)(*ref, grid=launch.grid)
        torch.cuda.synchronize()
        ok = True
        for i in launch.outputs:
            got = args[i].cpu().numpy().astype(np.float64)
            want = np.asarray(ref[i]).astype(np.float64)
            ok &= bool(np.allclose(got, want, rtol=1e-2, atol=5e-2))
        failed += not ok
        print(f"{'ok ' if ok else 'BAD'} {case.name}", flush=True)
    return failed


def matmul_cases() -> Iterator[tuple[str, str, Any, bool, bool]]:
    """(label, dtype name, configuration, A transposed, B transposed) of every matmul case, in a
    fixed order; the dtype name "fp16-streamk" runs the configuration by stream-K."""
    from tc_torch.ops import matmul as mm

    lists = (("fp16", False, mm.TENSOR_CORE_CONFIGS), ("tf32", False, mm.TF32_CONFIGS),
             ("tf32", True, [c for c in mm.TF32_K_MAJOR_B_CONFIGS
                            if c.key() not in {t.key() for t in mm.TF32_CONFIGS}]),
             ("fp16", False, extra_fp16_configs()))
    for dname, b_k_major_only, cfgs in lists:
        for cfg in cfgs:
            for ta in (False, True):
                for tb in ((True,) if b_k_major_only else (False, True)):
                    yield f"{dname} {cfg} ta={ta:d} tb={tb:d}", dname, cfg, ta, tb
    for cfg in mm.STREAM_K_CONFIGS:
        yield f"fp16 stream-K {cfg}", "fp16-streamk", cfg, False, False


def extra_fp16_configs() -> list[Any]:
    """Configurations that are not the tuner's but whose code differs: tiles 176 columns wide,
    whose B panels are partial (tc_opt.dot_layouts.PARTIAL_PANEL_PADDING; their labels hold
    'NB': '176'), and clusters of 4 over 2 x 2 tiles (CompileOptions.cluster_2x2; their labels
    hold 'cluster_2x2': True)."""
    from tc_torch.ops import matmul as mm

    return [mm._cfg(128, 176, 64, 8, 3), mm._cfg(192, 176, 64, 12, 3, 1, **mm.PERSISTENT, cluster_multicast=True),
            mm._cfg(128, 176, 64, 8, 4, **mm.PERSISTENT, overlap_epilogue=True, cluster_multicast=True),
            mm._cfg(192, 192, 64, 12, 3, 2, **mm.PERSISTENT, cluster_multicast=True, cluster_2x2=True),
            mm._cfg(128, 256, 64, 8, 4, 2, **mm.PERSISTENT, overlap_epilogue=True, cluster_multicast=True,
                    cluster_2x2=True)]


def _operand(rows: int, cols: int, batch: int, transposed: bool, aligned: bool, dtype: Any) -> Any:
    """A (batch, rows, cols) operand, a transposed view when `transposed`; its row stride a
    multiple of 64 elements when `aligned`, else the extent itself."""
    import torch

    inner, outer = (rows, cols) if transposed else (cols, rows)
    stride = -(-inner // 64) * 64 if aligned else inner
    storage = torch.randn(batch, outer, stride, device="cuda").to(dtype)[:, :, :inner]
    return storage.transpose(1, 2) if transposed else storage


def matmul_configurations(shard: int, shards: int, persistent_only: bool = False,
                          shape: int | None = None, match: str = "") -> int:
    """Every `shards`-th matmul case from the `shard`-th at MATMUL_SHAPES (only the persistent
    configurations with A not transposed if `persistent_only`, only MATMUL_SHAPES[shape] if
    given, only labels containing `match`); the number wrong."""
    import torch

    from tc_lang.diagnostics import TcResourceError
    from tc_torch.ops import matmul as mm

    torch.manual_seed(0)
    failed = 0
    for i, (label, dname, cfg, ta, tb) in enumerate(matmul_cases()):
        if i % shards != shard or (persistent_only and not (cfg.options.get("persistent") and not ta)):
            continue
        if match not in label:
            continue
        dtype = torch.float32 if dname == "tf32" else torch.float16
        for z, m, n, k, aligned in MATMUL_SHAPES if shape is None else MATMUL_SHAPES[shape:shape + 1]:
            if dname == "fp16-streamk" and z > 1:
                continue  # (stream-K runs single products)
            a = _operand(m, k, z, ta, aligned, dtype)
            b = _operand(k, n, z, tb, aligned, dtype)
            c = torch.full((z, m, n), float("nan"), device="cuda", dtype=dtype)
            try:
                mm.matmul_out(c, a, b, configs=[cfg], precision="tf32" if dname == "tf32" else "ieee",
                              transpose_first="none", stream_k="on" if dname == "fp16-streamk" else "off")
            except TcResourceError as exc:  # (the tuner skips it too: "does not fit")
                print(f"ok  {label}: does not fit this layout ({str(exc).splitlines()[0][-90:]})", flush=True)
                break
            ref = a.double() @ b.double()
            err = (c.double() - ref).abs().max().item()
            scale = ref.abs().max().item()
            ok = err <= (1e-2 * scale if dname == "tf32" else 0.5 + 2e-2 * scale)
            failed += not ok
            print(f"{'ok ' if ok else 'BAD'} {label} {z}x{m}x{n}x{k}{'' if aligned else ' unaligned'}"
                  f" (max error {err:.3g})", flush=True)
    return failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matmul", action="store_true", help="tc_torch.matmul's configurations, not the tutorials")
    ap.add_argument("--shard", default="0/1", help="I/N: every N-th matmul case from the I-th")
    ap.add_argument("--persistent", action="store_true",
                    help="only the persistent matmul configurations, A not transposed")
    ap.add_argument("--shape", type=int, default=None, choices=range(len(MATMUL_SHAPES)),
                    help="only this one of MATMUL_SHAPES (an index)")
    ap.add_argument("--match", default="", help="only the matmul cases whose label contains this text")
    args = ap.parse_args(argv)
    try:
        shard, shards = (int(x) for x in args.shard.split("/"))
        if not 0 <= shard < shards:
            raise ValueError
    except ValueError:
        ap.error(f"--shard takes I/N with 0 <= I < N, got {args.shard!r}")
    failed = matmul_configurations(shard, shards, args.persistent, args.shape, args.match) if args.matmul \
        else tutorial_kernels()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
