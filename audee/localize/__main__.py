"""``python -m audee.localize case.pkl`` is ``audee localize case.pkl``."""
import sys

from audee.cli import main

sys.exit(main(["localize", *sys.argv[1:]]))
