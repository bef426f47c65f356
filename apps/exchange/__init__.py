"""Data in and out: file formats (CSV, JSON Lines, Parquet), Hugging Face datasets, Label Studio.

Not a Django app of its own (no models): the exporting modules of the other apps produce rows
and describe their columns; :mod:`apps.exchange.formats` turns those rows into files.
"""
