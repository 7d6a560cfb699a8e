"""robench: adversarial-robustness benchmarking for NLP classifiers.

Python API (the CLI does the same):

    import robench
    record = robench.run(robench.RunSpec(model="imbert", attack="advglue", task="sst2", train_size=2000))
    record = robench.evaluate(my_model, my_tokenizer, task="sst2", attack="textfooler", eval_size=200)
"""
from robench.core.errors import RobenchError
from robench.core.paths import Settings, resolve_settings
from robench.runs.spec import RunSpec, TrainConfig

__version__ = "0.1.0"
__all__ = ["RobenchError", "RunSpec", "Settings", "TrainConfig", "evaluate", "resolve_settings", "run", "train"]


def run(spec: RunSpec, settings: Settings | None = None, **kwargs):
    """Fine-tune (or reuse) -> attack -> write a run record. See `robench.runs.runner.run`."""
    from robench.runs.runner import run as _run

    return _run(spec, settings, **kwargs)


def train(spec: RunSpec, settings: Settings | None = None, **kwargs):
    """Fine-tune (or reuse the cached checkpoint). See `robench.runs.runner.train`."""
    from robench.runs.runner import train as _train

    return _train(spec, settings, **kwargs)


def evaluate(model, tokenizer=None, **kwargs):
    """Attack a model you already have (checkpoint, PreTrainedModel or function). See `robench.runs.evaluate`."""
    from robench.runs.evaluate import evaluate as _evaluate

    return _evaluate(model, tokenizer, **kwargs)
