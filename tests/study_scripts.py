"""The study scripts under studies/, imported as modules for their tests."""
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

STUDIES = Path(__file__).resolve().parents[1] / "studies"


def load_study(name: str) -> ModuleType:
    """`studies/<name>.py`, imported once and registered in sys.modules (its dataclasses resolve their
    annotations there). studies/ goes on the import path, as when a script runs, so that a script split into
    several files (gpu_lend.py and its gpu_lend_*.py) imports its parts by name."""
    if str(STUDIES) not in sys.path:
        sys.path.append(str(STUDIES))
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, STUDIES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]
