import sys

from xpiler_core.cli import main

sys.exit(main(["serve", *sys.argv[1:]]))
