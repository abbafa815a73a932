"""Tuning: parameter grids, sweeps, per-tool overrides within a budget, TOML output."""
