from __future__ import annotations

from tuner.commands import main

raise SystemExit(main())
