"""Human-facing output: tables and plots. Results stay records; these only render them."""
