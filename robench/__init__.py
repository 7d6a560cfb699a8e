"""robench: adversarial-robustness benchmarking for NLP classifiers.

Python API (the CLI does the same):

    import robench
    record = robench.run(robench.RunSpec(model="imbert", attack="advglue", task="sst2", train_size=2000))
"""
from robench.errors import RobenchError
from robench.settings import Settings, resolve_settings
from robench.spec import RunSpec, TrainConfig

__version__ = "0.1.0"
__all__ = ["RobenchError", "RunSpec", "Settings", "TrainConfig", "resolve_settings", "run", "train"]


def run(spec: RunSpec, settings: Settings | None = None, **kwargs):
    """Fine-tune (or reuse) -> attack -> write a run record. See `robench.runner.run`."""
    from robench.runner import run as _run

    return _run(spec, settings, **kwargs)


def train(spec: RunSpec, settings: Settings | None = None, **kwargs):
    """Fine-tune (or reuse the cached checkpoint). See `robench.runner.train`."""
    from robench.runner import train as _train

    return _train(spec, settings, **kwargs)
