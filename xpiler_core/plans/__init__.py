"""Direction plans: ``<source>_to_<target>.py``, each exposing ``plan(text, path, options, progress, cancel)``.

``xpiler_core.pipeline.translate`` imports the plan by name; adding a direction adds a file here.
"""
