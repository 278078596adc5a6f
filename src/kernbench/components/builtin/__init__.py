"""Built-in component models, one per file."""
