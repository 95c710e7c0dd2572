from xpiler_core._console import run

run()
