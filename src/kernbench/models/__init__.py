"""Models as data: a Hugging Face ``config.json`` (or the same keys in YAML) read into a
:class:`ModelConfig`, the one description of a model every command shares."""

from kernbench.models.config import DTYPES, ModelConfig
from kernbench.models.loader import PRESETS, check_model_name, from_dict, load_model

__all__ = ["DTYPES", "PRESETS", "ModelConfig", "check_model_name", "from_dict", "load_model"]
