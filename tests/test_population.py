"""The population searches under robench's constraints (robench.engine.population; issue 57, item 5)."""
import numpy as np
import pytest
from test_attacks import tiny_model  # noqa: F401  (a fixture)
from test_beam import DELETE, candidates, random_problem, trap
from test_fluency import WordLM, drive

from robench.engine.fluency import Fluency
from robench.engine.population import GeneticWordSwapSearch, SwarmWordSwapSearch
from robench.engine.search import WordSwapSearch

SEARCHES = {"genetic": GeneticWordSwapSearch, "swarm": SwarmWordSwapSearch}


def searched(kind, **knobs):
    parts = dict(indices=lambda o: [0, 2], importance=DELETE, candidates=candidates, similarity=None)
    return SEARCHES[kind](**{**parts, "population_size": 8, "generations": 10, **knobs})


@pytest.mark.parametrize("kind", SEARCHES)
def test_the_population_finds_the_label_change_the_greedy_choice_misses(kind):
    lost, _ = drive(WordSwapSearch(lambda o: [0, 2], DELETE, candidates, None), "a b c", WordLM({}), trap)
    won, _ = drive(searched(kind), "a b c", WordLM({}), trap)
    assert trap(lost.text[-1]) > 0.5
    assert won.text[-1] == "y b z" and trap(won.text[-1]) < 0.5 and won.words_perturbed == 2


@pytest.mark.parametrize("kind", SEARCHES)
def test_the_same_text_gives_the_same_search(kind):
    """The draws are seeded by the original text, so a resumed run finds the same texts."""
    asked: list[list[str]] = [[], []]

    def victim(run):
        def p_of(text):
            asked[run].append(text)
            return trap(text)
        return p_of

    outs = [drive(searched(kind, population_size=4), "a b c", WordLM({}), victim(run))[0] for run in range(2)]
    assert outs[0].text == outs[1].text and np.array_equal(outs[0].probs, outs[1].probs)
    assert asked[0] == asked[1] and len(asked[0]) > 4


@pytest.mark.parametrize("kind", SEARCHES)
def test_every_swap_of_the_result_passes_the_language_model(kind):
    """y costs 5 nats: with max_drop 3 no text the search returns or keeps holds it, crossover included."""
    lm = WordLM({"y": -5.0})
    out, asked = drive(searched(kind, fluency=Fluency(3.0, lm)), "a b c", lm, trap)
    assert "y" not in out.text[-1].split() and trap(out.text[-1]) > 0.5


@pytest.mark.parametrize("kind", SEARCHES)
def test_the_language_model_cut_keeps_the_most_probable_candidates(kind):
    """With lm_top_k 1 only x (more probable than y) is ever tried at word 0, so the population cannot win."""
    lm = WordLM({"y": -1.0})
    out, asked = drive(searched(kind, lm_top_k=1, fluency=Fluency(100.0, lm)), "a b c", lm, trap)
    assert "y" not in out.text[-1].split()
    free, _ = drive(searched(kind, lm_top_k=2, fluency=Fluency(100.0, lm)), "a b c", lm, trap)
    assert free.text[-1] == "y b z"


@pytest.mark.parametrize("kind", SEARCHES)
def test_the_word_budget_holds_and_no_candidates_end_at_once(kind):
    capped, _ = drive(searched(kind, max_modification_rate=0.3), "a b c", WordLM({}), trap)
    assert capped.words_perturbed == 1
    none = SEARCHES[kind](lambda o: [0, 2], DELETE, lambda cur, orig, i: [], None, population_size=8)
    with pytest.raises(StopIteration) as stop:  # ends before asking the victim anything
        next(none(("a b c",), 0, np.array([0.9, 0.1])))
    assert stop.value.value.text == ("a b c",) and stop.value.value.words_perturbed == 0


@pytest.mark.parametrize("kind", SEARCHES)
@pytest.mark.parametrize("seed", range(20))
def test_random_problems_end_on_texts_of_passing_swaps(seed, kind):
    """Random two-class problems: every word the result changed is a listed candidate whose text the LM passed,
    and the result scores at least as well as the original."""
    lm, options, p_of, cands = random_problem(np.random.default_rng(seed))
    search = SEARCHES[kind](lambda o: list(range(6)), DELETE, cands, None, fluency=Fluency(2.0, lm),
                            population_size=6, generations=5)
    out, _ = drive(search, "s t u v x y", lm, p_of)
    words = out.text[-1].split()
    assert all(w == o or w in options[i] for i, (w, o) in enumerate(zip(words, "s t u v x y".split())))
    assert p_of(out.text[-1]) <= p_of("s t u v x y")
    assert lm.log_probs([out.text[-1]])[0] - lm.log_probs(["s t u v x y"])[0] >= -2.0 - 1e-9


def test_the_knobs_agree():
    from robench.attacks.gradient_swap import GradientSwapParams
    from robench.attacks.textfooler import TextFoolerParams

    with pytest.raises(ValueError, match="takes no beam"):
        TextFoolerParams(population_size=8, beam_width=2)
    with pytest.raises(ValueError, match="population_search must be one of"):
        TextFoolerParams(population_size=8, population_search="ants")
    with pytest.raises(ValueError, match="set population_size too"):
        TextFoolerParams(lm_top_k=4)
    with pytest.raises(ValueError, match="needs the language model"):
        TextFoolerParams(population_size=8, lm_top_k=4)
    with pytest.raises(ValueError, match="population_size must be 0 for gradient-swap"):
        GradientSwapParams(population_size=8)


@pytest.mark.parametrize("kind", SEARCHES)
def test_textfooler_runs_the_population_through_the_engine(tiny_model, settings, kind):  # noqa: F811
    """The recipe's knob reaches the engine: the same results twice (seeded draws), and more victim queries
    than the greedy search."""
    import dataclasses

    from test_attacks import fake_textfooler_resources, make_ctx, new_victim

    from robench.attacks.textfooler import RECIPE, TextFoolerParams

    params = TextFoolerParams(window=5, skip_shorter_than_window=False, similarity_threshold=0.8)

    def attack(population):
        ctx = make_ctx(settings, new_victim(tiny_model), 16, labels_from=new_victim(tiny_model))
        knobs = dict(population_size=population, generations=3, population_search=kind)
        return RECIPE.attack_with(ctx, dataclasses.replace(params, **knobs), fake_textfooler_resources())

    greedy, once, again = attack(0), attack(6), attack(6)
    assert [dataclasses.asdict(r) for r in once] == [dataclasses.asdict(r) for r in again]
    assert sum(r.queries for r in once) > sum(r.queries for r in greedy)
    assert any(r.status == "successful" for r in once)
