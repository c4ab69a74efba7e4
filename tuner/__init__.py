"""tuner: measured tuning of training settings and speed techniques for timm models."""

from __future__ import annotations

from tuner.config import TrainConfig, load_config_file
from tuner.errors import TunerError

__all__ = ["TrainConfig", "TunerError", "load_config_file"]
__version__ = "0.1.0"
