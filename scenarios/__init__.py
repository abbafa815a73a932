"""Where generated and imported episodes come from: world, agents, families, suites, trees, traces, importers."""
