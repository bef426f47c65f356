"""REST API of the annotations app."""
