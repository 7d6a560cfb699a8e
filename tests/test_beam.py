"""The beam search in word-importance order (robench.engine.beam; issue 57, item 5)."""
import numpy as np
import pytest
from test_attacks import tiny_model  # noqa: F401  (a fixture)
from test_fluency import WordLM, drive

from robench.engine.beam import BeamWordSwapSearch
from robench.engine.fluency import Fluency
from robench.engine.search import Importance, WordSwapSearch

DELETE = Importance(lambda o, i: o.delete(i))


def trap(text: str) -> float:
    """p(gold) of "a b c" with swaps at words 0 and 2: x lowers it most alone, but only y then z flips it."""
    w = text.split()
    if len(w) == 2:  # the importance texts: word 0 matters more than word 2
        return 0.5 if w[0] == "b" else 0.8
    p = 0.9 - {"x": 0.3, "y": 0.25}.get(w[0], 0.0)
    if w[2] == "z":
        p -= 0.3 if w[0] == "y" else 0.05
    return p


def candidates(cur, orig, i):
    return [cur.replace(i, w) for w in (("x", "y") if i == 0 else ("z",))]


def test_the_beam_finds_the_label_change_the_greedy_choice_misses():
    greedy = WordSwapSearch(lambda o: [0, 2], DELETE, candidates, None)
    beam = BeamWordSwapSearch(lambda o: [0, 2], DELETE, candidates, None, width=2)
    lost, _ = drive(greedy, "a b c", WordLM({}), trap)
    won, _ = drive(beam, "a b c", WordLM({}), trap)
    assert lost.text[-1] == "x b z" and trap(lost.text[-1]) > 0.5  # greedy: the best first swap, then stuck
    assert won.text[-1] == "y b z" and trap(won.text[-1]) < 0.5 and won.words_perturbed == 2


def test_the_beam_honours_the_language_model_and_the_word_budget():
    lm = WordLM({"y": -5.0})  # y costs 5 nats: with max_drop 3 the beam may not keep it
    beam = BeamWordSwapSearch(lambda o: [0, 2], DELETE, candidates, None, width=2, fluency=Fluency(3.0, lm))
    out, asked = drive(beam, "a b c", lm, trap)
    assert "y b c" in asked and out.text[-1] == "x b z"
    capped = BeamWordSwapSearch(lambda o: [0, 2], DELETE, candidates, None, width=2, max_modification_rate=0.3)
    one, _ = drive(capped, "a b c", WordLM({}), trap)
    assert one.words_perturbed == 1


def random_problem(rng):
    """A random two-class problem on "s t u v x y": each word's effect on p(gold), a fake LM, each position's
    candidate list; returns (lm, options, p_of, candidates)."""
    vocab = [f"w{j}" for j in range(12)]
    effect = {w: float(rng.uniform(-0.05, 0.25)) for w in vocab}
    lm = WordLM({w: float(rng.uniform(-4, 1)) for w in vocab})
    options = {i: list(rng.choice(vocab, size=int(rng.integers(0, 5)), replace=False)) for i in range(6)}

    def p_of(text):
        return float(np.clip(0.95 - sum(effect.get(w, 0.0) for w in text.split()), 0.01, 0.99))

    def cands(cur, orig, i):
        return [cur.replace(i, w) for w in options[i] if w != cur.words[i]]

    return lm, options, p_of, cands


@pytest.mark.parametrize("seed", range(40))
def test_width_one_makes_the_greedy_choice(seed):
    """Random two-class problems (word effects, candidate lists, an LM constraint): beam width 1 ends on the
    text the greedy search ends on, asking the victim no more."""
    rng = np.random.default_rng(seed)
    lm, _, p_of, cands = random_problem(rng)
    parts = dict(indices=lambda o: list(range(6)), importance=DELETE, candidates=cands, similarity=None,
                 fluency=Fluency(2.0, lm), max_modification_rate=float(rng.choice([0.3, 0.5, 1.0])))
    greedy, _ = drive(WordSwapSearch(**parts), "s t u v x y", lm, p_of)
    beam, _ = drive(BeamWordSwapSearch(**parts, width=1), "s t u v x y", lm, p_of)
    assert beam.text == greedy.text and beam.words_perturbed == greedy.words_perturbed


def test_gradient_swap_refuses_a_beam():
    from robench.attacks.gradient_swap import GradientSwapParams

    with pytest.raises(ValueError, match="beam_width must be 1 for gradient-swap"):
        GradientSwapParams(beam_width=4)


def test_textfooler_runs_the_beam_through_the_engine(tiny_model, settings):  # noqa: F811
    """The recipe's knob: width 1 is the greedy search's results; a wider beam succeeds on at least the same
    examples on this tiny victim, and asks the victim more."""
    import dataclasses

    from test_attacks import fake_textfooler_resources, make_ctx, new_victim

    from robench.attacks.textfooler import RECIPE, TextFoolerParams

    params = TextFoolerParams(window=5, skip_shorter_than_window=False, similarity_threshold=0.8)

    def attack(width):
        ctx = make_ctx(settings, new_victim(tiny_model), 16, labels_from=new_victim(tiny_model))
        return RECIPE.attack_with(ctx, dataclasses.replace(params, beam_width=width), fake_textfooler_resources())

    greedy, one, wide = attack(1), attack(1), attack(3)
    assert [dataclasses.asdict(r) for r in one] == [dataclasses.asdict(r) for r in greedy]
    won = {r.index for r in greedy if r.status == "successful"}
    assert won <= {r.index for r in wide if r.status == "successful"}
    assert sum(r.queries for r in wide) > sum(r.queries for r in greedy)
