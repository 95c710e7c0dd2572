"""Verification: kernel test specs, real-compiler verdicts, and the harness that runs and compares."""
