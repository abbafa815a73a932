"""The regression gate: a committed baseline and the comparison CI runs against it."""
