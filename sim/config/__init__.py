"""What a run is made of: detector specs, the run configuration, the manifest and its hash."""
