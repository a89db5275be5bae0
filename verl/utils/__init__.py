"""verl's ``verl.utils``: ``hf_tokenizer``, ``hf_processor``, ``omega_conf_to_dataclass`` and the utility modules
(``fs``, ``hdfs_io``, ``tensordict_utils``, ``torch_functional``, ``seqlen_balancing``, ``tracking``, ...).

Importing this package is cheap: the tokenizer helpers import transformers when called.
"""

from verl.utils import config, tokenizer
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.tokenizer import hf_processor, hf_tokenizer

__all__ = ["config", "hf_processor", "hf_tokenizer", "omega_conf_to_dataclass", "tokenizer"]
