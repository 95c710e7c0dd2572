"""Local SMT repair: localize a failing candidate's suspect expressions, replace one by a hole, let z3 fill it.

Entry point: :func:`xpiler_core.repair.engine.repair_candidate`.
"""
