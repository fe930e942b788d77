"""Reference providers: honest implementations that pass everything they declare, and the broken
variants ("mutants") that prove each scenario can fail."""
