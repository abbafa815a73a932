"""Executing detector tasks: one task, the local pool, the Ray engine, checkpoints, the runner, replay."""
