from __future__ import annotations

from tuner.cli import main

raise SystemExit(main())
