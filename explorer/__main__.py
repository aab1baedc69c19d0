import sys

from explorer.cli.main import main

sys.exit(main())
