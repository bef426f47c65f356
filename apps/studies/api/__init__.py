"""REST API of the studies app."""
