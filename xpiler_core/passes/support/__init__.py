"""Helpers the passes share (not passes): AST support, symbolic thread evaluation, CAS-loop atomics, cooperative-groups desugaring, the CPU prelude, CST edits, reductions, dependence tests."""
