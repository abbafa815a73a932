"""Playing episodes: the open-loop scorer, the closed-loop harness, the per-check watchdog, label validation."""
