"""robench: adversarial-robustness benchmarking for NLP classifiers.

Python API (the CLI is a thin layer over it: the same options, presets and defaults):

    import robench
    record = robench.run(model="imbert", attack="textfooler")          # --preset quick, as `robench run`
    record = robench.run(model="imbert", attack="advglue", preset="paper", seed=1)
    record = robench.run(robench.RunSpec(model="imbert", attack="advglue", train_size=2000))  # fully explicit
    record = robench.evaluate(my_model, my_tokenizer, task="sst2", attack="textfooler", eval_size=200)
"""
from robench.core.errors import RobenchError
from robench.core.paths import Settings, resolve_settings
from robench.runs.options import RunOptions
from robench.runs.spec import RunSpec, TrainConfig

__version__ = "0.1.0"
__all__ = ["RobenchError", "RunOptions", "RunSpec", "Settings", "TrainConfig", "evaluate", "make_spec",
           "resolve_settings", "run", "train"]
_RUN_ARGS = ("device", "console", "force", "on_estimate")


def make_spec(settings: Settings | None = None, **options) -> RunSpec:
    """The `RunSpec` that `robench run` would build from the same options (`RunOptions` fields; `seed=N` for one
    seed): given values > the preset's (default `quick`) > defaults."""
    from robench.runs.options import specs

    (spec,) = specs(RunOptions.of({"seeds": (0,), **options}), settings or resolve_settings())
    return spec


def run(spec: RunSpec | None = None, settings: Settings | None = None, **kwargs):
    """Fine-tune (or reuse) -> attack -> write a run record. `spec` is used as it is; without one, the keyword
    options build it as `robench run` does (`make_spec`). See `robench.runs.runner.run`."""
    from robench.runs.runner import run as _run

    spec, kwargs = _spec_and_args(spec, settings, kwargs)
    return _run(spec, settings, **kwargs)


def train(spec: RunSpec | None = None, settings: Settings | None = None, **kwargs):
    """Fine-tune (or reuse the cached checkpoint); options as for `run`. See `robench.runs.runner.train`."""
    from robench.runs.runner import train as _train

    spec, kwargs = _spec_and_args(spec, settings, kwargs)
    return _train(spec, settings, **kwargs)


def _spec_and_args(spec: RunSpec | None, settings: Settings | None, kwargs: dict) -> tuple[RunSpec, dict]:
    run_args = {k: kwargs.pop(k) for k in _RUN_ARGS if k in kwargs}
    if spec is None:
        return make_spec(settings, **kwargs), run_args
    if kwargs:
        raise RobenchError(f"options {sorted(kwargs)} given with an explicit RunSpec: put them in the spec")
    return spec, run_args


def __getattr__(name: str):
    """`robench.evaluate` is `robench.runs.evaluate.evaluate` itself (its signature and docs in `help`), imported on
    first use so that `import robench` stays light."""
    if name == "evaluate":
        from robench.runs.evaluate import evaluate

        return evaluate
    raise AttributeError(f"module 'robench' has no attribute {name!r}")
