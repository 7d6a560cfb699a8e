"""Which version of each resource a run's attack used, by content, checked before a record is reused.

A run id hashes the spec, not the resources: a BERT-Attack record made with a 2-step MLM has the id of one made
with the 400-step build. So each resource that can change what an attack finds declares itself here, a
`Resource` in `RESOURCES` (a plugin adds its own under the entry-point group `robench.resources`):

* `identity(settings, variant)`: which version is in place now, as a small flat dict, computed cheaply (a build's
  `build.json` and manifest, a file's cached checksum, a package's version: nothing is loaded or built);
* `recorded(attack_resources)`: what a record written before identities were recorded (the published
  reference's among them) says of it, in the same keys, or None when it says nothing comparable.

A recipe names the resources its parameters use (`AttackRecipe.resources(params) -> {name: variant}`). The runner
writes their identities into the record (`resources.identity`) and onto every partial line, and reuses a
finished record, or resumes a partial one, only while they are the same (`RunStore.finished`,
`RunStore.load_partial`); otherwise the run is done again, with a warning naming the resource. The run ids stay
as they were, so the published records keep theirs. An older record is compared on the keys it recorded
(`recorded`), and not at all on a resource it says nothing of.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from robench.core.errors import RobenchError
from robench.core.hashing import content_hash
from robench.core.paths import Settings
from robench.core.registry import Registry

Identity = dict[str, Any]  # flat: str, int, float or bool values


@dataclass(frozen=True)
class Resource:
    """A resource whose version can change an attack's output (see the module)."""

    name: str
    identity: Callable[[Settings, str], Identity]
    recorded: Callable[[Mapping[str, Any]], Identity | None] = lambda attack: None
    fix: str = "restore the resource the record names (`robench resources list` shows what is in place)"


RESOURCES: Registry[Resource] = Registry("resources", "robench.engine.resources.identity")


def declare(name: str, recorded: Callable[[Mapping[str, Any]], Identity | None] | None = None, fix: str | None = None
            ) -> Callable[[Callable[[Settings, str], Identity]], Callable[[Settings, str], Identity]]:
    """Decorator: `@declare("masked-lm")` on a resource's identity function registers it (`fix`: how to put the
    recorded version back in place, for `differing`'s message)."""

    def decorator(identity: Callable[[Settings, str], Identity]) -> Callable[[Settings, str], Identity]:
        resource = Resource(name, identity, recorded or (lambda attack: None))
        RESOURCES.register(name)(resource if fix is None else Resource(name, identity, resource.recorded, fix))
        return identity

    return decorator


def identities(settings: Settings, uses: Mapping[str, str]) -> dict[str, Identity]:
    """The identity of each resource in `uses` (name -> variant) as it is now; a resource that is missing says
    so (`unavailable`) rather than raising: the recipe's own check reports it, with its fix."""
    out: dict[str, Identity] = {}
    for name, variant in sorted(uses.items()):
        try:
            found = RESOURCES.get(name).identity(settings, variant)
        except (RobenchError, OSError, ValueError, KeyError) as exc:
            found = {"unavailable": f"{type(exc).__name__}: {str(exc)[:200]}"}
        out[name] = {"variant": variant, **found}
    return out


def differing(record_resources: Mapping[str, Any], now: Mapping[str, Identity]) -> dict[str, str]:
    """The resources of `now` that differ from those a record (its `resources`) was made with: name -> what
    differs, `KEY RECORDED then, NOW now`. A record with `identity` is compared key by key; an older one on what
    `Resource.recorded` reads from it, and not on a resource it says nothing comparable of."""
    recorded = record_resources.get("identity")
    out = {}
    for name, current in sorted(now.items()):
        then = recorded.get(name) if isinstance(recorded, dict) else _legacy(name, record_resources)
        if not isinstance(then, dict):
            continue
        keys = sorted(set(then) | set(current)) if isinstance(recorded, dict) else sorted(set(then) & set(current))
        changed = [k for k in keys if _plain(then.get(k)) != _plain(current.get(k))]
        if changed:
            out[name] = ", ".join(f"{k} {then.get(k)!r} then, {current.get(k)!r} now" for k in changed[:3])
    return out


def identity_problem(record_resources: Mapping[str, Any], now: Mapping[str, Identity]) -> str | None:
    """Why a record whose `resources` are `record_resources` was made with other resources than `now`, or None."""
    differ = differing(record_resources, now)
    return "it was made with other resources: " + "; ".join(f"{n} ({d})" for n, d in differ.items()) \
        if differ else None


def how_to_restore(names: list[str]) -> str:
    """Each named resource's fix, one clause each."""
    return "; ".join(f"{name}: {RESOURCES.get(name).fix}" for name in names)


def _legacy(name: str, record_resources: Mapping[str, Any]) -> Identity | None:
    attack = record_resources.get("attack")
    if not isinstance(attack, dict) or name not in RESOURCES:
        return None
    return RESOURCES.get(name).recorded(attack)


def identity_digest(now: Mapping[str, Identity]) -> str:
    """What each partial line carries of the resources (a resume under others starts over)."""
    return content_hash(_plain(dict(now)), length=16)


def _plain(obj: Any) -> Any:
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


# ------------------------------------------------------------------------------------------- the built-in resources

def _mlm_recorded(attack: Mapping[str, Any]) -> Identity | None:
    """An older record's built MLM: its held-out accuracy (the build's fingerprint that every record carries)."""
    info = _used(attack, "masked_lm")
    if info is None or not str(info.get("name", "")).startswith("robench-built-mlm"):
        return None
    accuracy = info.get("heldout_masked_accuracy")
    return {"heldout_accuracy": accuracy} if accuracy is not None else None


@declare("masked-lm", recorded=_mlm_recorded,
         fix="build it with the defaults, `robench resources build-mlm --force` (the build is deterministic: its "
             "defaults rebuild the published MLM; about 4 minutes on an idle 2-core CPU), or pass the published "
             "build's folder as --cache-dir")
def masked_lm_identity(settings: Settings, variant: str) -> Identity:
    """The built MLM: the SHA-256 of its weights and config (from its manifest), steps and held-out accuracy; a
    local folder: the checksum of its files; a hub id: its name."""
    from pathlib import Path

    from robench.core.hashing import file_sha256
    from robench.engine.resources.mlm import BUILT_MLM, built_mlm_identity

    if variant == BUILT_MLM:
        return built_mlm_identity(settings)
    folder = Path(variant)
    if folder.is_dir():
        files = {p.relative_to(folder).as_posix(): file_sha256(p, settings.cache_dir)
                 for p in sorted(folder.rglob("*")) if p.is_file()}
        return {"files": content_hash(files, length=16)}
    return {"name": variant}


def _used(attack: Mapping[str, Any], *names: str) -> dict[str, Any] | None:
    """The first of `names` that a record's attack resources describe (a TextAttack recipe's under "used")."""
    for name in names:
        info = attack.get(name)
        if isinstance(info, dict):
            info = info.get("used", info)
            return info if isinstance(info, dict) else None
    return None


def _encoder_recorded(attack: Mapping[str, Any]) -> Identity | None:
    """An older record's MiniLM encoder: its calibrated thresholds."""
    info = _used(attack, "sentence_encoder", "encoder")
    thresholds = info.get("calibrated_thresholds") if info is not None else None
    return {"thresholds": content_hash(thresholds, length=16)} if isinstance(thresholds, dict) else None


# An older record's synonym table is not compared: its build key was computed another way before 2026-12-03
# (caches keyed by content), so the same table had another key.
@declare("synonyms")
def synonyms_identity(settings: Settings, variant: str) -> Identity:
    """A synonym table by its build key (its inputs' checksums, configuration and format), or the neighbour
    lists' checksum."""
    from robench.engine.resources.synonyms import synonym_table_key

    return {"key": synonym_table_key(settings, variant)}


@declare("lexicon")
def lexicon_identity(settings: Settings, variant: str) -> Identity:
    """The lexical relations (antonyms, WordNet, inflections) by the checksum of every input file."""
    from robench.engine.resources.lexicon import lexicon_inputs, relations_dir

    return {"key": relations_dir(settings, lexicon_inputs(settings)).name}


@declare("sentence-encoder", recorded=_encoder_recorded)
def encoder_identity(settings: Settings, variant: str) -> Identity:
    """The encoder's weights (package version) and, for MiniLM, its calibrated thresholds."""
    from robench.engine.resources.encoders import encoder_identity as identity

    return identity(variant)


@declare("pos-tagger")
def tagger_identity(settings: Settings, variant: str) -> Identity:
    """The NLTK perceptron tagger by its files' checksums."""
    from robench.engine.resources.nltk_data import tagger_digest

    return {"files": tagger_digest(settings)}


@declare("stopwords")
def stopwords_identity(settings: Settings, variant: str) -> Identity:
    from robench.engine.resources.nltk_data import stopwords

    return {"words": content_hash(sorted(stopwords(settings)), length=16)}


@declare("context-similarity")
def context_identity(settings: Settings, variant: str) -> Identity:
    from robench.classifier.backbone import resolve_backbone

    return {"model": resolve_backbone("minilm").fingerprint}


@declare("natural-filters")
def natural_filters_identity(settings: Settings, variant: str) -> Identity:
    """The `natural` setting's own inputs (corpora, grammar checker, inflection tables)."""
    from robench.engine.natural import natural_identity

    return natural_identity(settings)


@declare("causal-lm")
def causal_lm_identity(settings: Settings, variant: str) -> Identity:
    """The fluency constraint's language model by its file's SHA-256 (or the folder `ROBENCH_LANGUAGE_MODEL`
    names, by its weights')."""
    from robench.engine.resources.causal_lm import lm_source

    source = lm_source(settings)
    return {"name": source.name, "sha256": source.sha256}
