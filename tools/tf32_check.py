"""float32 products on tf32 tensor cores (tc_torch.matmul, precision="tf32") on the GPU: every
configuration checked against a float64 product in the four operand layouts at odd sizes, then
timed alone at the given sizes and, the fastest few, in interleaved rounds with torch.matmul
(cuBLAS with allow_tf32).

    PYTHONPATH=<packages/*/src> python3 tools/tf32_check.py [--sizes 4096,8192] [--rounds 7]
        [--keep 2] [--configs 'MB,NB,KB,warps,stages[,p][,s][,n];...'] [--layouts nn,tn,nt,tt]
        [--timed nn,tn]

A configuration's trailing `p` asks for a persistent grid, `s` for a bulk-store epilogue, `n` for
no producer warp (a persistent grid whose programs each run the plain pipeline), `w` for a producer
warpgroup that hands its registers to the consumers (CompileOptions.producer_warpgroup: a producer
for A B too, whose B^T is read into registers), `m` for clusters of 2 that multicast the tiles
two programs share (CompileOptions.cluster_multicast; with `q` too, clusters of 4 over 2 x 2
tiles sharing both operands: CompileOptions.cluster_2x2), `o` for the overlapped epilogue
(CompileOptions.overlap_epilogue), `g16` for 16 rows of tiles per group of the program
order (GROUP_SIZE; 8 by default).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

#: Odd shapes (M, N, K) of the correctness check: partial tiles in every dimension, and K = 0
#: (the loop never runs: the accumulator's zeros come from its final wait).
ODD_SHAPES = ((333, 517, 259), (1000, 1000, 1000), (64, 48, 16), (96, 160, 0))
#: Operand layouts: n = row-major as given, t = the transpose of a row-major matrix (a view).
LAYOUTS = ("nn", "tn", "nt", "tt")


def operands(m: int, n: int, k: int, layout: str) -> tuple[Any, Any]:
    import torch

    a = torch.randn(m, k, device="cuda") if layout[0] == "n" else torch.randn(k, m, device="cuda").t()
    b = torch.randn(k, n, device="cuda") if layout[1] == "n" else torch.randn(n, k, device="cuda").t()
    return a, b


def close(got: Any, a: Any, b: Any) -> tuple[bool, float]:
    ref = a.double() @ b.double()
    err = (got.double() - ref).abs().max().item()
    return err <= 1e-2 * max(ref.abs().max().item(), 1.0), err


def tuned_configs(layout: str) -> list[Any]:
    """The configurations tc_torch's auto-tuner offers a tf32 product in `layout` (B K-contiguous,
    `?t`, has tiles of its own that do not fit where B is restaged)."""
    import torch

    from tc_torch.ops.matmul import configs_for

    return list(configs_for(torch.float32, torch.device("cuda"), "tf32", trans_b=layout[1] == "t"))


def check_correctness(configs_of: Callable[[str], list[Any]], layouts: tuple[str, ...]) -> int:
    import torch

    from tc_opt.resources import ResourceLimitError
    from tc_torch.ops.matmul import matmul_out

    failures = 0
    for layout in layouts:
        for cfg in configs_of(layout):
            for m, n, k in ODD_SHAPES:
                a, b = operands(m, n, k, layout)
                c = torch.full((1, m, n), float("nan"), device="cuda")
                try:
                    matmul_out(c, a.unsqueeze(0), b.unsqueeze(0), configs=[cfg], precision="tf32")
                    torch.cuda.synchronize()
                    good, err = close(c[0], a, b)
                except ResourceLimitError as exc:  # the tuner skips such a configuration
                    print(f"  {config_name(cfg)} {layout} {m}x{n}x{k}: does not fit "
                          f"({str(exc).splitlines()[0][-120:]}); not a failure", flush=True)
                    continue
                except Exception as exc:  # reported, counted: the run goes on
                    print(f"  {cfg} {layout} {m}x{n}x{k}: FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                    failures += 1
                    continue
                if not good:
                    print(f"  {cfg} {layout} {m}x{n}x{k}: WRONG, max error {err:.3g}", flush=True)
                    failures += 1
            print(f"checked {config_name(cfg)} in layout {layout}", flush=True)
    return failures


#: Letters of `--configs` for a configuration's schedule options: (option, value).
OPTION_LETTERS = {"p": ("persistent", True), "s": ("tma_store", True), "n": ("warp_specialize", False),
                  "w": ("producer_warpgroup", True), "m": ("cluster_multicast", True),
                  "q": ("cluster_2x2", True), "o": ("overlap_epilogue", True), "k": ("stream_k", True)}


def parse_config(text: str, config: Callable[..., Any]) -> Any:
    """`MB,NB,KB,warps,stages` and option letters (OPTION_LETTERS; gN: GROUP_SIZE N) as a
    tc_runtime config made by `config`; a ValueError names what is malformed."""
    fields = text.split(",")
    try:
        mb, nb, kb, w, s = (int(x) for x in fields[:5])
    except ValueError:
        raise ValueError(f"a configuration is MB,NB,KB,warps,stages[,letters], got {text!r}") from None
    defines: dict[str, int] = {"MB": mb, "NB": nb, "KB": kb}
    options = {}
    for field in fields[5:]:
        if field[:1] == "g" and field[1:].isdigit():  # g16: GROUP_SIZE rows of tiles in the program order
            defines["GROUP_SIZE"] = int(field[1:])
        elif field in OPTION_LETTERS:
            options[OPTION_LETTERS[field][0]] = OPTION_LETTERS[field][1]
        else:
            raise ValueError(f"unknown option letter {field!r} in {text!r} (letters: {', '.join(OPTION_LETTERS)}; "
                             f"gN: GROUP_SIZE N)")
    return config(defines, num_warps=w, num_stages=s, options=options or None)


def config_name(cfg: Any) -> str:
    """MBxNBxKB/warps/stages and the option letters of a configuration."""
    given = cfg.options or {}
    letters = "".join(f",{letter}" for letter, (name, value) in OPTION_LETTERS.items()
                      if name in given and given[name] == value)
    if "GROUP_SIZE" in cfg.defines:
        letters += f",g{cfg.defines['GROUP_SIZE']}"
    return f"{cfg.defines['MB']}x{cfg.defines['NB']}x{cfg.defines['KB']}/{cfg.num_warps}/{cfg.num_stages}{letters}"


def main() -> None:
    import torch

    from tc_opt.resources import ResourceLimitError
    from tc_runtime import config
    from tc_runtime.testing import do_bench
    from tc_torch.ops.matmul import matmul_out

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--keep", type=int, default=2)
    ap.add_argument("--configs", default="",
                    help="MB,NB,KB,warps,stages[,p][,s][,n][,w][,gN] separated by ';' (default: the tuner's for "
                         "each layout)")
    ap.add_argument("--layouts", default=",".join(LAYOUTS), help="the layouts checked")
    ap.add_argument("--timed", default="nn,tn", help="the layouts timed")
    args = ap.parse_args()
    configs_of = tuned_configs
    if args.configs:
        given = [parse_config(text, config) for text in args.configs.split(";")]
        configs_of = lambda layout: given  # noqa: E731
    layouts = tuple(x for x in args.layouts.split(",") if x)
    failures = check_correctness(configs_of, layouts)
    for size in (int(x) for x in args.sizes.split(",") if x):
        flops = 2.0 * size ** 3
        for layout in (x for x in args.timed.split(",") if x):
            a, b = operands(size, size, size, layout)
            c = torch.empty(1, size, size, device="cuda")

            def cublas(a: Any = a, b: Any = b) -> None:
                torch.backends.cuda.matmul.allow_tf32 = True
                torch.matmul(a, b)

            timed: dict[str, Callable[[], None]] = {}
            speed: dict[str, float] = {}
            for cfg in configs_of(layout):
                name = config_name(cfg)

                def run(cfg: Any = cfg, a: Any = a, b: Any = b, c: Any = c) -> None:
                    matmul_out(c, a.unsqueeze(0), b.unsqueeze(0), configs=[cfg], precision="tf32")

                try:
                    run()
                except ResourceLimitError as exc:  # (e.g. a bulk-store tile that only fits another layout)
                    print(f"  {size} {layout} {name}: does not fit ({str(exc).splitlines()[0][-120:]}); "
                          "not timed", flush=True)
                    continue
                torch.cuda.synchronize()
                good, err = close(c[0], a, b)
                if not good:
                    print(f"  {size} {layout} {name}: WRONG, max error {err:.3g}", flush=True)
                    failures += 1
                    continue
                speed[name] = flops / (do_bench(run)[0] * 1e-3) / 1e12
                timed[name] = run
                print(f"  {size} {layout} {name}: {speed[name]:.1f} TFLOPS", flush=True)
            if args.rounds and timed:
                from bench_rounds import report_fastest

                report_fastest(f"{size} {layout}", flops, ("torch", cublas), speed, timed, args.keep, args.rounds)
                torch.backends.cuda.matmul.allow_tf32 = False
    print("FAILURES", failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
