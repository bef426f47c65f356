"""API of the model arena."""
