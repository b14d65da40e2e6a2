"""Reports: plots and tables drawn from ``ringleader.metrics`` results."""
