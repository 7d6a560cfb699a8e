"""Benchmark grids: a TOML config -> RunSpecs (cartesian product) -> train jobs, then attack jobs.

    robench grid examples/grid-tiny.toml                 # local Ray instance sized to this machine
    robench grid CONFIG --address HEAD:6379              # an existing Ray cluster
    robench grid CONFIG --executor local                 # sequentially in this process (the test oracle)

One job per module: `config` parses a config and expands it into RunSpecs, `driver`
plans the cells (`plan_cells`: each spec resolved once) and runs the jobs (`grid`),
`executors` says where they run (this process or Ray), `cells` holds the units of work and their state,
`board` draws the live table.
"""
from robench.grid.config import GridConfig, expand, load_config
from robench.grid.driver import GridCell, GridResult, TrainJob, grid, grid_estimate, plan_cells

__all__ = ["GridCell", "GridConfig", "GridResult", "TrainJob", "expand", "grid", "grid_estimate", "load_config",
           "plan_cells"]
