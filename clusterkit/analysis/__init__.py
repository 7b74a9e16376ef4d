"""Reading a partition: the placement report, explanations, optimality gap, strategy comparison."""
