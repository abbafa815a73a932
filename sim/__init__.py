"""The benchmark around the detectors: configuration, playing episodes, scoring, execution, tuning, gate, reports, CLI."""
