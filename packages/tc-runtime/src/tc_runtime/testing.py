"""Benchmarking helpers of the tutorials: do_bench, Benchmark, perf_report.

`do_bench` times on the GPU with CUDA events (torch's when the caller has imported torch, else the
driver's), flushing L2 between calls by zeroing a 256 MB buffer, like Triton. Without a GPU it
times with `time.perf_counter`, so every tutorial also runs on the interpreter. `perf_report`
sweeps a benchmark function over x values and lines, prints a table, and writes a PNG plot and a
CSV file.
"""

from __future__ import annotations

import csv
import math
import operator
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from . import driver
from .errors import TcDeviceError

_FLUSH_BYTES = 256 * 1024 * 1024
_flush_buffers: dict[int, driver.DeviceBuffer] = {}


def _real(value: object) -> float | None:
    """`value` as a float where it is a plain real number (not a bool, not a sequence), else None:
    what Timing's arithmetic takes."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _on_median(op: Callable[[Any, Any], Any], reflected: bool = False,
               as_tuple: bool = False) -> Callable[[Any, object], Any]:
    """Timing's `op` with a number: applied to its median (`reflected`: the number on the left);
    with anything else NotImplemented, or (`as_tuple`) `op` of the plain tuples."""
    def method(self: Any, other: object) -> Any:
        x = _real(other)
        if x is None:
            return op(tuple(self), other) if as_tuple else NotImplemented
        return op(x, self[0]) if reflected else op(self[0], x)

    return method


class Timing(tuple[float, float, float]):
    """do_bench's result: (median, min, max) in milliseconds. The spec's tutorials use it both
    ways, so it is both: it unpacks as the matrix-multiplication tutorial does (`ms, min_ms,
    max_ms = do_bench(...)`) and computes as its median where a number is expected, as the
    fused-softmax tutorial's `gbps(do_bench(...))` does (`ms * 1e-3`, `float(t)`, `t < 1.0`)."""

    __slots__ = ()

    def __new__(cls, median: float, low: float, high: float) -> Timing:
        return super().__new__(cls, (float(median), float(low), float(high)))

    def __getnewargs__(self) -> tuple[float, float, float]:  # (pickling: __new__ takes three)
        return self[0], self[1], self[2]

    @property
    def median(self) -> float:
        """The median time, in milliseconds."""
        return self[0]

    def __float__(self) -> float:
        return self[0]

    def __format__(self, spec: str) -> str:
        return format(self[0], spec) if spec else str(tuple(self))

    # (arithmetic and comparisons with a number are the median's; tuple's own + and * would
    # concatenate, and other tuples still compare as tuples)
    __add__ = _on_median(operator.add)  # type: ignore[assignment]
    __radd__ = _on_median(operator.add, reflected=True)
    __sub__ = _on_median(operator.sub)
    __rsub__ = _on_median(operator.sub, reflected=True)
    __mul__ = _on_median(operator.mul)  # type: ignore[assignment]
    __rmul__ = _on_median(operator.mul, reflected=True)  # type: ignore[assignment]
    __truediv__ = _on_median(operator.truediv)
    __rtruediv__ = _on_median(operator.truediv, reflected=True)
    __lt__ = _on_median(operator.lt, as_tuple=True)  # type: ignore[assignment]
    __le__ = _on_median(operator.le, as_tuple=True)  # type: ignore[assignment]
    __gt__ = _on_median(operator.gt, as_tuple=True)  # type: ignore[assignment]
    __ge__ = _on_median(operator.ge, as_tuple=True)  # type: ignore[assignment]


def _gpu_backend() -> str:
    """'torch', 'driver' or 'cpu': how do_bench can time on this machine."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return "torch"
        except Exception:
            pass
    return "driver" if driver.is_available() else "cpu"


def do_bench(fn: Callable[[], object], warmup: float = 25, rep: float = 100,
             grad_to_none: Sequence[Any] | None = None, clear_l2: bool = True,
             device: str | None = None) -> Timing:
    """Run `fn` repeatedly; return (median, min, max) of its time in milliseconds.

    `warmup` and `rep` are milliseconds of warm-up and of measurement. `device` is "cuda", "cpu"
    or None (the GPU when there is one)."""
    if not callable(fn):
        raise TypeError(f"do_bench: fn must be a callable taking no arguments, got "
                        f"{type(fn).__name__}")
    for name, value in (("warmup", warmup), ("rep", rep)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"do_bench: {name} must be a number of milliseconds, got {value!r}")
    if not (0 <= warmup < math.inf and 0 < rep < math.inf):  # (NaN fails both)
        raise ValueError(f"do_bench: warmup must be >= 0 and rep > 0 (milliseconds), got "
                         f"warmup={warmup}, rep={rep}")
    if grad_to_none is not None and not isinstance(grad_to_none, (list, tuple)):
        raise TypeError(f"do_bench: grad_to_none must be a list of tensors, got "
                        f"{type(grad_to_none).__name__}")
    if device is not None and not (isinstance(device, str) and (
            device == "cpu" or device == "cuda" or device.startswith("cuda:"))):
        raise ValueError(f"do_bench: device must be 'cuda', 'cuda:N', 'cpu' or None, got "
                         f"{device!r}")
    backend = "cpu" if device == "cpu" else _gpu_backend()
    if device is not None and device.startswith("cuda") and backend == "cpu":
        raise TcDeviceError("do_bench(device='cuda'): no CUDA GPU is available")
    if backend == "cpu":
        return _bench_cpu(fn, warmup, rep, grad_to_none)
    if backend == "torch":
        return _bench_torch(fn, warmup, rep, grad_to_none, clear_l2)
    return _bench_driver(fn, warmup, rep, grad_to_none, clear_l2)


def _clear_grads(grad_to_none: Sequence[Any] | None) -> None:
    for t in grad_to_none or ():
        t.grad = None


def _counts(estimate_ms: float, warmup: float, rep: float) -> tuple[int, int]:
    est = max(estimate_ms, 1e-6)
    return max(1, int(warmup / est)), max(1, int(rep / est))


def _summary(times: list[float]) -> Timing:
    return Timing(statistics.median(times), min(times), max(times))


def _bench_cpu(fn: Callable[[], object], warmup: float, rep: float,
               grad_to_none: Sequence[Any] | None) -> Timing:
    fn()
    t0 = time.perf_counter()
    for _ in range(5):
        fn()
    est = (time.perf_counter() - t0) * 1000 / 5
    n_warmup, n_repeat = _counts(est, warmup, rep)
    for _ in range(n_warmup):
        fn()
    times = []
    for _ in range(n_repeat):
        _clear_grads(grad_to_none)
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return _summary(times)


def _bench_torch(fn: Callable[[], object], warmup: float, rep: float,
                 grad_to_none: Sequence[Any] | None, clear_l2: bool) -> Timing:
    import torch  # only reached when the caller has imported torch already

    cache = torch.empty(_FLUSH_BYTES, dtype=torch.int8, device="cuda") if clear_l2 else None

    def flush() -> None:
        if cache is not None:
            cache.zero_()

    event: Any = torch.cuda.Event
    fn()
    torch.cuda.synchronize()
    start, end = event(enable_timing=True), event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush()
        fn()
    end.record()
    torch.cuda.synchronize()
    n_warmup, n_repeat = _counts(start.elapsed_time(end) / 5, warmup, rep)
    starts = [event(enable_timing=True) for _ in range(n_repeat)]
    ends = [event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        _clear_grads(grad_to_none)
        flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return _summary([s.elapsed_time(e) for s, e in zip(starts, ends)])


def _bench_driver(fn: Callable[[], object], warmup: float, rep: float,
                  grad_to_none: Sequence[Any] | None, clear_l2: bool) -> Timing:
    dev = driver.get_device(0)
    stream = driver.current_stream(dev.index)
    buf = None
    if clear_l2:
        buf = _flush_buffers.get(dev.index)
        if buf is None:
            buf = _flush_buffers[dev.index] = driver.DeviceBuffer(dev, _FLUSH_BYTES)

    def flush() -> None:
        if buf is not None:
            buf.zero_async(stream)

    fn()
    dev.synchronize()
    start, end = driver.Event(), driver.Event()
    start.record(stream)
    for _ in range(5):
        flush()
        fn()
    end.record(stream)
    end.synchronize()
    n_warmup, n_repeat = _counts(start.elapsed_ms(end) / 5, warmup, rep)
    starts = [driver.Event() for _ in range(n_repeat)]
    ends = [driver.Event() for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        _clear_grads(grad_to_none)
        flush()
        starts[i].record(stream)
        fn()
        ends[i].record(stream)
    dev.synchronize()
    return _summary([s.elapsed_ms(e) for s, e in zip(starts, ends)])


# --------------------------------------------------------------------------- perf_report


class Benchmark:
    """What to sweep: `x_names` take each of `x_vals` together (x axis); `y_name` takes each of
    `y_vals`, one line per value labelled by `y_lines`; `args` are fixed keyword arguments.
    (Modern Triton's names line_arg/line_vals/line_names are accepted too.)"""

    def __init__(self, x_names: Sequence[str], x_vals: Sequence[Any], y_name: str = "",
                 y_vals: Sequence[Any] = (), y_lines: Sequence[str] | None = None,
                 ylabel: str = "", plot_name: str = "", args: dict[str, Any] | None = None,
                 xlabel: str = "", x_log: bool = False, y_log: bool = False,
                 styles: Sequence[Any] | None = None, *, line_arg: str | None = None,
                 line_vals: Sequence[Any] | None = None,
                 line_names: Sequence[str] | None = None) -> None:
        self.x_names = [x_names] if isinstance(x_names, str) else list(x_names)
        self.x_vals = list(x_vals)
        self.y_name = line_arg if line_arg is not None else y_name
        self.y_vals = list(line_vals if line_vals is not None else y_vals)
        lines = line_names if line_names is not None else y_lines
        self.y_lines = list(lines) if lines is not None else [str(v) for v in self.y_vals]
        self.ylabel = ylabel
        self.xlabel = xlabel
        self.plot_name = plot_name
        self.args = dict(args or {})
        self.x_log = x_log
        self.y_log = y_log
        self.styles = list(styles) if styles else None
        if not self.x_names or not self.x_vals:
            raise ValueError("Benchmark needs x_names and x_vals")
        if not self.y_name or not self.y_vals:
            raise ValueError("Benchmark needs y_name and y_vals (one line per value)")
        if len(self.y_lines) != len(self.y_vals):
            raise ValueError(f"Benchmark: {len(self.y_lines)} y_lines for {len(self.y_vals)} "
                             f"y_vals")


class Table:
    """The results of one benchmark: x values and, per line, (value, min, max)."""

    def __init__(self, bench: Benchmark) -> None:
        self.bench = bench
        self.rows: list[tuple[Any, list[Timing]]] = []

    @property
    def columns(self) -> list[str]:
        return [self.bench.x_names[0]] + self.bench.y_lines

    def text(self) -> str:
        head = self.columns
        body = [[_fmt(x)] + [_fmt(v[0]) for v in vals] for x, vals in self.rows]
        widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
        lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in body]
        title = self.bench.plot_name or "benchmark"
        return f"{title}:\n" + "\n".join(lines)

    def write_csv(self, path: Path) -> None:
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(self.bench.x_names + self.bench.y_lines
                       + [f"{n} (min)" for n in self.bench.y_lines]
                       + [f"{n} (max)" for n in self.bench.y_lines])
            for x, vals in self.rows:
                w.writerow([x] * len(self.bench.x_names) + [f"{v[0]:.4g}" for v in vals]
                           + [f"{v[1]:.4g}" for v in vals] + [f"{v[2]:.4g}" for v in vals])

    def plot(self, path: Path | None, show: bool) -> None:
        """Line plot with a min/max band; written with the Agg canvas (no GUI needed)."""
        from matplotlib.figure import Figure

        fig: Any
        if show:
            import matplotlib.pyplot as plt

            fig = plt.figure(figsize=(7, 4.5))
        else:  # no pyplot: nothing touches the global backend, no GUI is needed
            from matplotlib.backends.backend_agg import FigureCanvasAgg

            fig = Figure(figsize=(7, 4.5))
            FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        xs = [x for x, _ in self.rows]
        for j, label in enumerate(self.bench.y_lines):
            ys = [vals[j][0] for _, vals in self.rows]
            lo = [min(vals[j][1], vals[j][2]) for _, vals in self.rows]
            hi = [max(vals[j][1], vals[j][2]) for _, vals in self.rows]
            style = self.bench.styles[j] if self.bench.styles and j < len(self.bench.styles) else None
            kw: dict[str, Any] = {}
            if isinstance(style, tuple) and len(style) == 2:
                kw = {"color": style[0], "linestyle": style[1]}
            line, = ax.plot(xs, ys, label=label, marker=".", **kw)
            ax.fill_between(xs, lo, hi, alpha=0.15, color=line.get_color())
        ax.set_xlabel(self.bench.xlabel or self.bench.x_names[0])
        ax.set_ylabel(self.bench.ylabel)
        if self.bench.plot_name:
            ax.set_title(self.bench.plot_name)
        if self.bench.x_log:
            ax.set_xscale("log", base=2)
        if self.bench.y_log:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        if path is not None:
            fig.savefig(str(path), dpi=100)
        if show:
            import matplotlib.pyplot as plt

            plt.show()


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.3f}" if abs(v) < 1000 else f"{v:.1f}"
    return str(v)


def _as_timing(value: Any) -> Timing:
    if isinstance(value, (tuple, list)):
        if len(value) == 3:
            return Timing(value[0], value[1], value[2])
        if len(value) == 1:
            v = float(value[0])
            return Timing(v, v, v)
        raise ValueError(f"a benchmark function must return a number or (value, min, max), got "
                         f"{len(value)} values")
    v = float(value)
    return Timing(v, v, v)


_T = TypeVar("_T")


def _progress(items: Sequence[_T], title: str) -> Iterator[_T]:
    """tqdm when installed, else a one-line counter on stderr."""
    try:
        from tqdm import tqdm  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        tqdm = None
    if tqdm is not None:
        yield from tqdm(items, desc=title, leave=False)
        return
    n = len(items)
    for i, item in enumerate(items):
        sys.stderr.write(f"\r{title}: {i}/{n}")
        sys.stderr.flush()
        yield item
    sys.stderr.write(f"\r{title}: {n}/{n}\n")
    sys.stderr.flush()


class Mark:
    """A benchmark function with its sweeps; `run` executes them."""

    def __init__(self, fn: Callable[..., Any], benchmarks: Benchmark | Sequence[Benchmark]):
        self.fn = fn
        self.benchmarks = [benchmarks] if isinstance(benchmarks, Benchmark) else list(benchmarks)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def _run(self, bench: Benchmark) -> Table:
        table = Table(bench)
        points = [(x, y) for x in bench.x_vals for y in bench.y_vals]
        results: dict[tuple[int, int], Timing] = {}
        for k, (x, y) in enumerate(_progress(points, bench.plot_name or "benchmark")):
            kwargs = {**bench.args, **{n: x for n in bench.x_names}, bench.y_name: y}
            results[(k // len(bench.y_vals), k % len(bench.y_vals))] = _as_timing(self.fn(**kwargs))
        for i, x in enumerate(bench.x_vals):
            table.rows.append((x, [results[(i, j)] for j in range(len(bench.y_vals))]))
        return table

    def run(self, show_plots: bool = False, print_data: bool = False,
            save_path: str | Path = "") -> list[Table]:
        """Sweep every benchmark; print tables; write <plot_name>.png and .csv under save_path."""
        tables = []
        out_dir = Path(save_path) if save_path else None
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
        for bench in self.benchmarks:
            table = self._run(bench)
            tables.append(table)
            name = bench.plot_name or "benchmark"
            if out_dir is not None:
                table.write_csv(out_dir / f"{name}.csv")
            if out_dir is not None or show_plots:
                table.plot(out_dir / f"{name}.png" if out_dir is not None else None, show_plots)
            if print_data:
                print(table.text())
        return tables


def perf_report(benchmarks: Benchmark | Iterable[Benchmark]) -> Callable[[Callable[..., Any]], Mark]:
    """Decorator: @perf_report(Benchmark(...)) def bench(...) -> bench.run(...)"""
    bench_list = [benchmarks] if isinstance(benchmarks, Benchmark) else list(benchmarks)
    return lambda fn: Mark(fn, bench_list)
