"""REST API of pairwise preferences."""
