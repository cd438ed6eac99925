"""distflow.contrib: slim."""
