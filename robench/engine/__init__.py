"""The attack engine: what a recipe is (`attack`), the concurrent scheduler, the word view, the greedy search,
input gradients, TextAttack-style metrics and the offline attack resources. It queries the model through
`robench.classifier.victim`."""
