"""UBJSON, the binary JSON of XGBoost's ``.ubj`` model files, read and written in Python for
the scikit-learn estimators' ``save_model`` / ``load_model``: they keep their attributes
(classes, feature names) inside the model's document, which the Rust import does not read."""

from __future__ import annotations

import json
from typing import Any


def document(data: bytes) -> dict[str, Any] | None:
    """A model file's document: JSON (polars-gbt's or XGBoost's) or UBJSON (XGBoost's);
    None for polars-gbt's binary format."""
    if data[:1] != b"{":
        return None
    try:
        return json.loads(data)
    except ValueError:
        return loads(data)


def loads(data: bytes) -> dict[str, Any]:
    """A UBJSON document (XGBoost's ``.ubj`` models, typed arrays included)."""
    import struct

    fixed = {b"i": ">b", b"U": ">B", b"I": ">h", b"l": ">i", b"L": ">q", b"d": ">f", b"D": ">d"}
    at = 0

    def take(n: int) -> bytes:
        nonlocal at
        if at + n > len(data):
            raise ValueError("truncated UBJSON")
        chunk = data[at : at + n]
        at += n
        return chunk

    def number(marker: bytes) -> Any:
        fmt = fixed[marker]
        return struct.unpack(fmt, take(struct.calcsize(fmt)))[0]

    def string() -> str:
        return take(number(take(1))).decode()

    def value(marker: bytes) -> Any:
        if marker in fixed:
            return number(marker)
        if marker == b"S" or marker == b"H":
            return string()
        if marker == b"C":
            return take(1).decode()
        if marker in (b"Z", b"N"):
            return None
        if marker in (b"T", b"F"):
            return marker == b"T"
        if marker in (b"[", b"{"):
            return container(marker)
        raise ValueError(f"unknown UBJSON marker {marker!r}")

    def container(kind: bytes) -> Any:
        nonlocal at
        typed = count = None
        if data[at : at + 1] == b"$":
            at += 1
            typed = take(1)
        if data[at : at + 1] == b"#":
            at += 1
            count = number(take(1))
        items: list[Any] = []
        out: dict[str, Any] = {}
        while count is None or (len(out) if kind == b"{" else len(items)) < count:
            if count is None and data[at : at + 1] in (b"]", b"}"):
                at += 1
                break
            key = string() if kind == b"{" else None
            item = value(typed if typed is not None else take(1))
            if kind == b"{":
                out[key] = item
            else:
                items.append(item)
        return out if kind == b"{" else items

    return value(take(1))


def dumps(value: Any) -> bytes:
    """``value`` (a JSON document) in UBJSON, as XGBoost writes ``.ubj`` models: objects and
    arrays untyped, integers as int32 or int64, floats as float32 (XGBoost's ``d``) where
    exact, else float64, strings as UTF-8 with an int64 length."""
    import struct

    out = bytearray()

    def length(n: int) -> None:
        out.extend(b"L" + struct.pack(">q", n))

    def put(v: Any) -> None:
        if v is None:
            out.extend(b"Z")
        elif v is True:
            out.extend(b"T")
        elif v is False:
            out.extend(b"F")
        elif isinstance(v, int):
            out.extend(b"l" + struct.pack(">i", v) if -(2**31) <= v < 2**31 else b"L" + struct.pack(">q", v))
        elif isinstance(v, float):
            single = struct.pack(">f", v)
            out.extend(b"d" + single if struct.unpack(">f", single)[0] == v else b"D" + struct.pack(">d", v))
        elif isinstance(v, str):
            raw = v.encode()
            out.extend(b"S")
            length(len(raw))
            out.extend(raw)
        elif isinstance(v, (list, tuple)):
            out.extend(b"[")
            for item in v:
                put(item)
            out.extend(b"]")
        elif isinstance(v, dict):
            out.extend(b"{")
            for k, item in v.items():
                raw = str(k).encode()
                length(len(raw))
                out.extend(raw)
                put(item)
            out.extend(b"}")
        else:
            raise TypeError(f"cannot write {type(v).__name__} as UBJSON")

    put(value)
    return bytes(out)
