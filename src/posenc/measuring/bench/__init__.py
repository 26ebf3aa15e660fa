"""``posenc bench``: time RoPE implementations side by side, in one run, against the memory limit.

* :mod:`~posenc.measuring.bench.settings`    the flags, and the command's settings checked once from
  them and passed down whole: :class:`BenchConfig` (kernel rows), :class:`ModelBenchConfig`
  (``--model``), :class:`BenchRun` (which of the two, and the JSON's path);
* :mod:`~posenc.measuring.bench.kernel_rows` the kernel rows: posenc's rotation, the usual eager code,
  compiled and Liger rows, each as a multiple of a same-bytes memory pass;
* :mod:`~posenc.measuring.bench.model_rows`  the model rows: a ``transformers`` Llama, unpatched and
  patched in turn, its forward, decode and position-encoding time;
* :mod:`~posenc.measuring.bench.cli`         the command: the settings, the run, the markdown tables, the JSON.

Timings on a shared machine move from run to run; only ratios measured within one run are meaningful,
which is why the rows compared are timed in the same process, interleaved round by round. See
``docs/kernels.md`` and ``docs/transformers.md``.
"""

from .cli import format_model_table, format_ms, format_table, run
from .kernel_rows import (
    CEILING,
    EAGER,
    IMPLEMENTATIONS,
    eager_rotary,
    environment,
    liger_rotation,
    rotate_half,
    run_benchmark,
)
from .model_rows import PE_SCOPE, run_model_benchmark
from .settings import (
    DTYPES,
    FULL_SHAPES,
    LLAMA3_8B,
    MAX_COUNT,
    MODEL_SIZES,
    MODES,
    QK_LAYOUTS,
    QUICK_SHAPES,
    SHAPES,
    TINY,
    BenchConfig,
    BenchRun,
    ModelBenchConfig,
    add_arguments,
    check_writable,
    config_from_args,
    parse_count,
)

__all__ = [
    "CEILING",
    "DTYPES",
    "EAGER",
    "FULL_SHAPES",
    "IMPLEMENTATIONS",
    "LLAMA3_8B",
    "MAX_COUNT",
    "MODEL_SIZES",
    "MODES",
    "PE_SCOPE",
    "QK_LAYOUTS",
    "QUICK_SHAPES",
    "SHAPES",
    "TINY",
    "BenchConfig",
    "BenchRun",
    "ModelBenchConfig",
    "add_arguments",
    "check_writable",
    "config_from_args",
    "eager_rotary",
    "environment",
    "format_model_table",
    "format_ms",
    "format_table",
    "liger_rotation",
    "parse_count",
    "rotate_half",
    "run",
    "run_benchmark",
    "run_model_benchmark",
]
