"""Compare-page pins in a share link: one URL parameter, base64 JSON of each pin's label and its
own share parameters (explorer.io.share), decoded with the same checks. Nothing is evaluated.

>>> from explorer import Strategy, load_cluster, load_model
>>> m, c, s = load_model("tiny-gpt"), load_cluster("classroom"), Strategy(dp=2, global_batch=8)
>>> pins, messages = decode_pins(encode_pins([("mine", m, c, s)]))
>>> pins[0][0], pins[0][1].strategy == s, messages
('mine', True, [])
"""
from __future__ import annotations

import base64
import binascii
import json

from explorer.errors import ExplorerError
from explorer.io.share import MAX_SPEC_CHARS, decode, encode

MAX_PINS = 4
MAX_LABEL = 80          # the Compare page makes labels of up to 40 typed characters or "#n <strategy>"
MAX_CHARS = MAX_PINS * MAX_SPEC_CHARS


def encode_pins(pins) -> str:
    """pins: (label, model, cluster, strategy) each -> one URL-safe parameter value."""
    data = [{"label": label[:MAX_LABEL], "params": encode(model, cluster, strategy)}
            for label, model, cluster, strategy in pins[:MAX_PINS]]
    raw = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_pins(text: str) -> tuple:
    """([(label, Shared)], messages); a malformed value gives no pins and one message."""
    if len(text) > MAX_CHARS:
        return [], [f"link parameter 'pins' is longer than {MAX_CHARS} characters"]
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        return [], ["link parameter 'pins' is not valid base64 JSON"]
    if not isinstance(data, list):
        return [], ["link parameter 'pins' must hold a list"]
    pins, messages = [], []
    for i, item in enumerate(data[:MAX_PINS]):
        if not (isinstance(item, dict) and isinstance(item.get("label"), str) and isinstance(item.get("params"), dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in item["params"].items())):
            messages.append(f"pin {i + 1} of the link is malformed; left out")
            continue
        try:
            shared = decode(item["params"])
        except ExplorerError as err:
            messages.append(f"pin {i + 1}: {err}; left out")
            continue
        if shared.messages:
            messages.append(f"pin {i + 1}: {'; '.join(shared.messages)}; left out")
            continue
        pins.append((item["label"][:MAX_LABEL], shared))
    if len(data) > MAX_PINS:
        messages.append(f"the link has {len(data)} pins; the first {MAX_PINS} are kept")
    return pins, messages
