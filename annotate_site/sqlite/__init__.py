"""SQLite backend whose writers queue inside the process (see :mod:`.base`)."""
