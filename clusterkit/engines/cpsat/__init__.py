"""The CP-SAT strategy: reductions, the exact model, solving with a proven bound."""
