"""Uploaded files (bytes + a file name) as models, clusters and strategies.

The same schemas as the files the CLI reads (model_io, cluster_io,
strategy_io); parsed with json.loads or a budgeted yaml.SafeLoader only (safe_load.py:
size, alias and nesting budgets), never evaluated.
Every failure is one ExplorerError line naming the file.

>>> model_from_upload("m.json", b'{"family": "gpt", "layers": 2, "hidden": 64, "heads": 4, '
...                   b'"seq_len": 32, "vocab": 100}').name
'm'
>>> model_from_upload("m.json", b"{oops")
Traceback (most recent call last):
...
explorer.errors.ExplorerError: m.json: malformed JSON at line 1 column 2: Expecting property name enclosed in double quotes
"""
from __future__ import annotations

from pathlib import PurePath

from explorer.io.clusters import cluster_from_dict
from explorer.errors import ExplorerError
from explorer.io.safe_load import MAX_FILE_BYTES
from explorer.io.models import SUFFIXES, hf_max_positions, is_huggingface, model_from_dict, parse_mapping
from explorer.io.strategies import strategy_from_dict

MAX_UPLOAD_BYTES = MAX_FILE_BYTES       # the same cap as a file the CLI reads


def utf8_text(data: bytes, where: str, limit: int, what: str = "an upload") -> str:
    """`data` as text: refused in one line beyond `limit` bytes or when it is not UTF-8."""
    if len(data) > limit:
        raise ExplorerError(f"{where}: {len(data):,} bytes is more than the {limit:,} {what} may have")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ExplorerError(f"{where}: not UTF-8 text") from None


def mapping_from_upload(name: str, data: bytes) -> dict:
    """The top-level mapping of an uploaded .json, .yaml or .yml file."""
    suffix = PurePath(name).suffix.lower()
    if suffix not in SUFFIXES:
        raise ExplorerError(f"{name}: unsupported file type {suffix or '(none)'!r}; use .json, .yaml or .yml")
    return parse_mapping(utf8_text(data, name, MAX_UPLOAD_BYTES), suffix, name)


def _build(name: str, data: bytes, build, *args):
    mapping = mapping_from_upload(name, data)
    try:
        return build(mapping, *args)
    except ExplorerError as err:
        raise ExplorerError(f"{name}: {err}") from None


def _stem(name: str) -> str:
    """The file's stem as the model's name; '' for a bare config.json (the config names itself: hf_name)."""
    stem = PurePath(name).stem
    return "" if stem == "config" else stem or "uploaded"


def model_from_upload(name: str, data: bytes, seq_len: int | None = None):
    """Our model schema or a HuggingFace config.json (see model_io); `seq_len`: the training sequence
    length of a HuggingFace config (hf_sequence_suggestion gives its longest as a suggestion)."""
    return _build(name, data, model_from_dict, _stem(name), seq_len)


def hf_sequence_suggestion(name: str, data: bytes):
    """For an uploaded HuggingFace config: the longest sequence it supports (max_position_embeddings), to
    offer as the training sequence length; None for our schema, whose seq_len is the training one."""
    mapping = mapping_from_upload(name, data)
    try:
        return hf_max_positions(mapping) if is_huggingface(mapping) else None
    except ExplorerError as err:
        raise ExplorerError(f"{name}: {err}") from None


SUGGESTED_SEQ_LEN = 4096
"""The training sequence length the app suggests for an uploaded HuggingFace config whose longest is above it: the
pre-training length of Llama 2 (Touvron et al. 2023, Sec 2.2: 4k context) and of the Megatron-Bridge MoE
performance rows (assets/validation/megatron_bridge.json, s = 4096). A config's max_position_embeddings is the
longest it supports (131,072 for Qwen2.5 and Llama 3.1), which the app had suggested: a lecturer's walk then read
175.9 s and 732 GiB a device for Qwen2.5-7B on its first view."""


def suggested_training_length(longest: int) -> int:
    """The sequence length offered for a config that supports up to `longest` tokens (SUGGESTED_SEQ_LEN)."""
    return min(int(longest), SUGGESTED_SEQ_LEN)


def cluster_from_upload(name: str, data: bytes):
    return _build(name, data, cluster_from_dict, _stem(name))


def strategy_from_upload(name: str, data: bytes):
    return _build(name, data, strategy_from_dict)
