"""The shared vocabulary every stage speaks: errors, units, percentiles and their confidence, signals, files, the schema of user input, the terminal, processes, the matched series."""
