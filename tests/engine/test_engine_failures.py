"""Real failures: an allocator that really runs out of memory, in a child process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

# The child caps its own address space at what it already maps + 1.5 GiB, then asks for a batch
# whose activations need several GiB: the CPU allocator really fails. A second, small run in the
# same capped process must then succeed: the failed run's memory was released.
_CHILD = textwrap.dedent(
    """
    import json, re, resource, sys
    sys.path.insert(0, "tests/engine")
    from engine_helpers import tiny
    from tuner.engine import train

    small = tiny(data="synthetic", synthetic_size=64, num_classes=10)
    train(small)  # warm every lazy allocation (threads, kernels) before the cap
    mapped_kib = int(re.search(r"VmSize:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
    cap = mapped_kib * 1024 + 1536 * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    big = small.replace(model="vit_tiny_r_s16_p8_224", model_kwargs={}, img_size=224,
                        batch_size=512, synthetic_size=512)
    results = [train(big), train(small)]
    print(json.dumps([[r.status, r.error] for r in results]))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS cap is Linux-only")
def test_out_of_memory_is_a_result_and_memory_is_released() -> None:
    child = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300
    )
    assert child.returncode == 0, child.stderr[-2000:]
    (big_status, big_error), (small_status, small_error) = json.loads(child.stdout.splitlines()[-1])
    assert big_status == "oom", big_error
    assert "allocate" in big_error
    assert small_status == "ok", small_error
