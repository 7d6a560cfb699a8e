"""robench's published results: per protocol or study, the packed run records (`records.jsonl`,
`examples.parquet`; `robench.core.packed`) and the tables generated from them. Installed as `robench.results`
(only the shipped reference protocols' records and grids), so a wheel carries them
(`robench.report.reference`)."""
