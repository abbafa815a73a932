"""Scoring: outcomes and metrics (the one official scorer), threshold sweeps, and the one bootstrap."""
