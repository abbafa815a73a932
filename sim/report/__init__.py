"""Reports of run folders: analysis (intervals, thresholds), plots, the scoreboard, the full report."""
