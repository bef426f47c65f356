"""REST API of the accounts app."""
