"""Engine benchmark: plain loop vs speed techniques added in turn (same code as `tuner bench`).

python bench/engine_bench.py                 # all rungs, 3 interleaved repeats
python bench/engine_bench.py --skip compile,fused_adamw --repeats 5
"""

from __future__ import annotations

import sys

from tuner.commands import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
