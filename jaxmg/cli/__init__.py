"""Command-line tools: python -m jaxmg launch | info | demo | bench."""
