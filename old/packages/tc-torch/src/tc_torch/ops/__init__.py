"""The tc_torch operations, one module each."""
