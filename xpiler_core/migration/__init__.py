"""Migrating a whole tree: every unit translated and verified as a job of its own, on the local cores or on a
Ray cluster, resumable from a record under the output folder, summed up in a static report.

* ``jobs.py`` — :class:`FileJob` (what one file needs: its path, text, options; plain data that crosses a
  process or a network) and :func:`run_job` (translate and verify it; the outcome as plain data: status,
  reason, tier, timings, the output's texts and manifest — nothing is written by the job).
* ``pool.py`` — :class:`LocalPool`: worker processes (``worker.py``) each in its own process group, fed one job
  at a time over a pipe; Ctrl-C or SIGTERM stops them and everything they started.
* ``ray_pool.py`` — the same jobs as Ray tasks (``pip install xpiler[cluster]``), sent only to nodes whose
  toolchains can judge the target.
* ``record.py`` — ``OUT/.xpiler/run.json``: per file the digest of every input of its job (its text and local
  headers, the spec beside it, the options, xpiler's version) and the outcome; a re-run skips what is unchanged.
* ``report.py`` — ``OUT/xpiler-report.html`` (static: sortable, filterable table, totals by status and reason,
  where the time went, the diff of each file) and ``OUT/xpiler-report.json``.
"""
