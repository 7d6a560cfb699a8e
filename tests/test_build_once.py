"""`robench.core.manifest.build_once`: a cached build is reused only while it verifies against its manifest."""
from __future__ import annotations

import json

from robench.core.manifest import build_once, write_manifest


def _builder(target, calls):
    def build():
        calls.append(1)
        target.mkdir(parents=True, exist_ok=True)
        (target / "weights.bin").write_bytes(b"w" * len(calls))
        record = {"heldout_accuracy_after": 0.5, "build": len(calls)}
        (target / "build.json").write_text(json.dumps(record))
        write_manifest(target)
        return record

    return build


def test_a_verified_build_is_kept_an_edited_one_rebuilt_and_force_rebuilds(tmp_path):
    target, calls = tmp_path / "mlm", []
    first = build_once(target, False, _builder(target, calls))
    assert not first.kept and first.record["build"] == 1 and len(calls) == 1
    kept = build_once(target, False, _builder(target, calls))
    assert kept.kept and kept.record == first.record and len(calls) == 1  # nothing was built again
    (target / "weights.bin").write_bytes(b"tampered")
    rebuilt = build_once(target, False, _builder(target, calls))
    assert not rebuilt.kept and "weights.bin" in rebuilt.problem and len(calls) == 2
    forced = build_once(target, True, _builder(target, calls))
    assert not forced.kept and forced.problem is None and len(calls) == 3
