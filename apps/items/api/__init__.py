"""REST API of the items app."""
