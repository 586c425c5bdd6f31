"""The decision policy: evidence in, advice out, every step traced (see advise.py for the one entry point)."""
