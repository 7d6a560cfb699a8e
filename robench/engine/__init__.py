"""The attack engine: the victim (batched, counted queries), the concurrent scheduler, the word view, the greedy
search, input gradients, TextAttack-style metrics and the offline attack resources."""
