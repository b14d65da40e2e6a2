"""Scenarios: named, reproducible simulations that reproduce a seed's table."""
