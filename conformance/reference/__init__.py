"""Reference providers: honest implementations that pass everything they declare. The broken variants
that prove each scenario can fail are test doubles of the suite's own tests (``tests/mutants/``)."""
