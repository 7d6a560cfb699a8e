"""Reports over finished runs: setting identity, statistics, comparisons, leaderboards, worst case, examples, pages."""
