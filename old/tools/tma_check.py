"""TMA copies (CompileOptions.tma) on the GPU: correctness against torch, then TFLOPS next to the
cp.async pipeline and cuBLAS, without the runtime's launch path (the kernel is compiled here,
loaded with tc_runtime.driver and launched with tc_runtime.tensor_maps.TmaArgPacker).

    PYTHONPATH=<packages/*/src> python3 tools/tma_check.py [--sizes 4096,8192] [--quick]

Kernels: the spec's tutorial matmul (unmasked loads: the maps' extents are unbounded) and a
masked 2-D variant (the masks along M and K become the maps' extents), at odd sizes too.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
TUTORIAL = (ROOT / "packages" / "tc-lang" / "tests" / "kernels" / "matmul_tutorial.tc").read_text()


def _masked_source() -> str:
    """The masked 2-D matmul of packages/tc-opt/tests/test_opt_tma.py (its `MASKED`), the kernel
    whose TMA plans those tests check; loaded from there so that both run the same source."""
    path = ROOT / "packages" / "tc-opt" / "tests" / "test_opt_tma.py"
    spec = importlib.util.spec_from_file_location("_tc_test_opt_tma", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return str(mod.MASKED)



#: How the loop's operands arrive: cp.async, TMA, TMA with a producer warp (warp_specialize), a
#: persistent grid with a producer warp ("persistent") or without ("tma+p"); "+store": the
#: epilogue as TMA bulk stores (CompileOptions.tma_store).
MODES = ("cp.async", "tma", "tma+ws", "persistent", "tma+p", "tma+store", "ws+store", "persistent+store",
         "tma+p+store")


def build(src: str, cfg: tuple[int, int, int, int, int], mode: str, spec: list[str | None], type_: str = "half") -> Any:
    from tc_nvptx.compiler import compile as tc_compile
    from tc_opt.options import CompileOptions

    mb, nb, kb, w, s = cfg
    options = CompileOptions(arch="sm_90", num_warps=w, num_stages=s, specialization=spec,
                             tma=mode != "cp.async", warp_specialize=mode.startswith(("tma+ws", "persistent", "ws")),
                             persistent=mode.startswith(("persistent", "tma+p")), tma_store="+store" in mode,
                             overlap_epilogue=mode.endswith("+overlap"))
    return tc_compile(src, defines={"TYPE": type_, "MB": mb, "NB": nb, "KB": kb}, options=options)


class Launchable:
    def __init__(self, ck: Any) -> None:
        from tc_runtime import driver
        from tc_runtime.kernel import persistent_ctas
        from tc_runtime.signature import Signature
        from tc_runtime.tensor_maps import TensorMapCache, packer_for

        dev = driver.get_device(0)
        self.ck = ck
        self.ctas = persistent_ctas  # (the runtime's grid for a persistent kernel)
        self.sms = int(dev.sm_count) if ck.persistent else 0
        self.module = driver.Module(dev, ptx=ck.ptx, cubin=ck.cubin, kernel=ck.name)
        self.fn = self.module.function(ck.name, num_warps=ck.num_warps, shared_bytes=ck.shared_bytes)
        extra = 3 if ck.persistent else 0  # a persistent kernel's grid (x, y, z) after the arguments
        sig = Signature(ck.name, [*ck.signature, *["i32"] * extra], [*ck.arg_names, *["grid_x", "grid_y", "grid_z"][:extra]])
        self.cache = TensorMapCache(driver.init())
        self.packer = packer_for(sig, ck.tensor_maps, driver.init(), self.cache)

    def __call__(self, grid: int, *args: object) -> None:
        if self.sms:
            self.packer.pack((*args, grid, 1, 1))
            self.fn.launch(self.ctas(grid, self.sms), 1, 1, 0, self.packer)  # type: ignore[arg-type]
            return
        self.packer.pack(args)
        self.fn.launch(grid, 1, 1, 0, self.packer)  # type: ignore[arg-type]


SPEC: list[str | None] = ["16", "16", "16", None, None, None, "16", "16", "16"]


def check_correctness(configs: list[tuple[int, int, int, int, int]], modes: tuple[str, ...] = MODES[1:]) -> int:
    """Run the tutorial (unmasked, at multiples of the tile) and the masked kernel (at odd sizes,
    garbage outside the matrices) in every configuration and mode against torch; return how many
    runs failed (a configuration that cannot be built is reported and skipped)."""
    import torch

    spec = SPEC
    # correctness: unmasked tutorial at multiples of the tile, masked kernel at odd sizes (and
    # K = 0: the loop runs no iteration, C must be zeros)
    failures = 0
    # (more programs than SMs too: a persistent kernel's CTAs then run several)
    for name, src, shapes in (("tutorial", TUTORIAL, [(512, 768, 1024), (1024, 1024, 256), (2048, 4096, 192)]),
                              ("masked", _masked_source(), [(300, 520, 200), (1000, 1000, 1000), (64, 48, 8),
                                                            (2049, 4000, 77), (300, 200, 0)])):
        for cfg, mode in ((c, m) for c in configs for m in modes):
            try:
                ck = build(src, cfg, mode, spec)
            except Exception as exc:  # (a persistent 4-stage 128x256 tile needs too much shared memory)
                print(f"{name} {cfg} {mode}: not built: {str(exc).splitlines()[0][:200]}", flush=True)
                continue
            print(f"{name} {cfg} {mode}: {len(ck.tensor_maps)} tensor maps, {ck.registers} registers, "
                  f"{ck.spills} spills, {ck.shared_bytes} B shared, {ck.num_warps} warps", flush=True)
            if not ck.tensor_maps:
                failures += 1
                continue
            k = Launchable(ck)
            for m, n, kk in shapes:
                pad = 256
                a = torch.zeros(-(-m // pad) * pad, -(-kk // pad) * pad + 64, device="cuda", dtype=torch.float16)
                b = torch.zeros(-(-kk // pad) * pad + 64, -(-n // pad) * pad, device="cuda", dtype=torch.float16)
                a[:m, :kk] = torch.randn(m, kk, device="cuda", dtype=torch.float16)
                b[:kk, :n] = torch.randn(kk, n, device="cuda", dtype=torch.float16)
                if name == "masked":  # garbage outside: the masks (the maps' extents) must hide it
                    a[m:, :] = 1000.0
                    a[:, kk:] = 1000.0
                    b[kk:, :] = 1000.0
                    b[:, n:] = 1000.0
                # C inside a larger matrix holding a sentinel: the masked-off part of the edge
                # tiles must not be written (row stride kept a multiple of 16 bytes)
                outside = torch.full((m + 64, n + 64 + (-n % 8)), -7.0, device="cuda", dtype=torch.float16)
                c = outside[:m, :n]
                c.fill_(-1.0)
                mb, nb = cfg[0], cfg[1]
                grid = -(-m // mb) * -(-n // nb)
                try:
                    k(grid, a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, kk, a.stride(0), b.stride(0), c.stride(0))
                    torch.cuda.synchronize()
                except Exception as exc:
                    print(f"  {m}x{n}x{kk}: FAILED {type(exc).__name__}: {str(exc)[:400]}", flush=True)
                    failures += 1
                    continue
                ref = (a[:m, :kk].float() @ b[:kk, :n].float())
                err = (c.float() - ref).abs().max().item()
                ok = err <= 0.5 + 2e-2 * ref.abs().max().item()
                untouched = (outside[m:, :] == -7.0).all().item() and (outside[:m, n:] == -7.0).all().item()
                if not untouched:
                    print(f"  {m}x{n}x{kk}: WROTE OUTSIDE C", flush=True)
                    ok = False
                failures += not ok
                print(f"  {m}x{n}x{kk}: max error {err:.3g} {'ok' if ok else 'WRONG'} "
                      f"(maps encoded {k.cache.encoded})", flush=True)
    return failures


def main() -> None:
    import torch

    from tc_runtime.testing import do_bench

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=0,
                    help="then time the fastest kernels of each size (--keep) and cuBLAS in this many interleaved rounds")
    ap.add_argument("--keep", type=int, default=3, help="how many of the fastest kernels the rounds time")
    ap.add_argument("--modes", default=",".join(MODES), help="modes to time (comma-separated)")
    ap.add_argument("--configs", default="", help="configurations MB,NB,KB,warps,stages separated by ';' "
                    "(default: six, or two with --quick)")
    args = ap.parse_args()
    modes = tuple(m for m in args.modes.split(",") if m)
    configs = [(128, 256, 64, 8, 4), (128, 256, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 64, 8, 4),
               (128, 128, 64, 8, 3), (128, 256, 64, 8, 2)]
    if args.quick:
        configs = configs[:2]
    if args.configs:
        configs = [tuple(int(x) for x in c.split(",")) for c in args.configs.split(";") if c]  # type: ignore[misc]
    spec = SPEC
    failures = check_correctness(configs[:2])
    # performance: tutorial kernel, TMA vs cp.async vs cuBLAS
    for size in (int(x) for x in args.sizes.split(",") if x):
        a = torch.randn(size, size, device="cuda", dtype=torch.float16)
        b = torch.randn(size, size, device="cuda", dtype=torch.float16)
        c = torch.empty(size, size, device="cuda", dtype=torch.float16)
        flops = 2.0 * size ** 3
        cublas = flops / (do_bench(lambda: torch.matmul(a, b))[0] * 1e-3) / 1e12
        print(f"{size}: cuBLAS {cublas:.1f} TFLOPS", flush=True)
        ref = torch.matmul(a, b).float()
        timed: dict[str, tuple[float, Any]] = {}
        for cfg in configs:
            for mode in modes:
                try:
                    k = Launchable(build(TUTORIAL, cfg, mode, spec))
                except Exception as exc:
                    print(f"  {cfg} {mode}: build failed {exc}", flush=True)
                    continue
                grid = -(-size // cfg[0]) * -(-size // cfg[1])

                def run(k: Launchable = k, grid: int = grid) -> None:
                    k(grid, a.data_ptr(), b.data_ptr(), c.data_ptr(), size, size, size, size, size, size)

                try:
                    run()
                    torch.cuda.synchronize()
                except Exception as exc:
                    print(f"  {cfg} {mode}: FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                    failures += 1
                    continue
                err = (c.float() - ref).abs().max().item()
                if err > 0.5 + 2e-2 * ref.abs().max().item():
                    print(f"  {cfg} {mode}: WRONG, max error {err:.3g}", flush=True)
                    failures += 1
                    continue
                t = flops / (do_bench(run)[0] * 1e-3) / 1e12
                timed[f"{'/'.join(map(str, cfg))} {mode}"] = (t, run)
                print(f"  {cfg} {mode}: {t:.1f} TFLOPS ({t / cublas:.3f}x cuBLAS), max error {err:.3g}, "
                      f"{k.ck.registers} regs", flush=True)
        cublas = flops / (do_bench(lambda: torch.matmul(a, b))[0] * 1e-3) / 1e12
        print(f"{size}: cuBLAS again {cublas:.1f} TFLOPS", flush=True)
        if args.rounds and timed:
            from bench_rounds import report_fastest

            report_fastest(str(size), flops, ("cuBLAS", lambda: torch.matmul(a, b)),
                           {name: t for name, (t, _) in timed.items()},
                           {name: fn for name, (_, fn) in timed.items()}, args.keep, args.rounds)
    print("FAILURES", failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
