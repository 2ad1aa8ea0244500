import sys

from audee.cli import main

sys.exit(main())
