"""The built wheel, installed non-editable in a fresh venv, carries everything robench needs at run time."""
from __future__ import annotations

import os
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
@pytest.mark.pip
def test_wheel_installs_and_runs(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(ROOT)], check=True, capture_output=True, text=True)
    wheel = next(dist.glob("robench-*.whl"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # The dependencies come from this test's environment (a path entry, so its editable robench is not seen);
    # robench itself only from the wheel.
    # (with the site-packages a .pth file chains in, as in a venv layered over another one)
    chained = [p for p in sys.path if p.endswith("-packages")]
    here = site.getsitepackages() + [sysconfig.get_paths()["purelib"]] + chained
    deps = [p for p in here if Path(p).is_dir()]
    (Path(purelib) / "_robench_test_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", purelib, str(wheel)],
                   check=True, capture_output=True, text=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", "import robench, robench.attacks, robench.models; "
                            "print(robench.__file__)"], cwd=tmp_path, env=env, check=True, capture_output=True,
                           text=True).stdout
    assert where.startswith(purelib), where
    listing = subprocess.run([str(python), "-m", "robench.cli", "list"], cwd=tmp_path, env=env, capture_output=True,
                             text=True)
    assert listing.returncode == 0, listing.stderr
    assert "textfooler" in listing.stdout and "imbert" in listing.stdout and "sst2" in listing.stdout
    # the shipped reference protocols: packed records in the wheel, unpacked offline from it (robench.results)
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    for protocol in ("reference", "reference-lowres", "reference-qnli"):
        assert {f"robench/results/{protocol}/records.jsonl", f"robench/results/{protocol}/examples.parquet"} <= names
    assert not any(name.endswith((".html", ".py")) and name.startswith("robench/results/")
                   and not name.endswith("__init__.py") for name in names)
    code = ("from robench.report.reference import reference_results_dir as packed, reference_runs_dir as runs; "
            "print(packed('reference')); print(len(list(runs('reference').glob('*.json'))))")
    runs = subprocess.run([str(python), "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**env, "ROBENCH_CACHE_DIR": str(tmp_path / "cache")})
    assert runs.returncode == 0, runs.stderr
    packed, count = runs.stdout.split()
    assert packed.startswith(purelib), packed
    assert int(count) == len((ROOT / "results" / "reference" / "records.jsonl").read_text().splitlines())
