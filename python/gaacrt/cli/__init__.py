"""Command-line entry points: gaac-run, gaac-inspect."""
