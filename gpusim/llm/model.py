"""Transformer model configurations: what `gpusim llm --model` reads.

A model is a frozen `ModelConfig`: its layer count, widths, attention heads, MLP size, vocabulary, weight dtype and,
for a mixture of experts, its experts. `load_model(text)` takes a shipped name (`llama-3-8b`: the files in
workloads/models/), the path of such a YAML file, or the path of a Hugging Face `config.json` (its fields mapped:
num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size,
torch_dtype, num_local_experts, num_experts_per_tok, tie_word_embeddings). A missing or bad field is a one-line
error naming the file and the field.
"""

from __future__ import annotations

import json
import numbers
from pathlib import Path

import attrs
import yaml

from ..app.format import shipped_root
from ..errors import GpusimError, shorten, shown

# bytes per element of each weight or cache dtype gpusim llm knows
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
# Hugging Face torch_dtype names -> ours
HF_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}
MODELS_DIR = "workloads/models"
MAX_DIMENSION = 10**7  # any width, count or vocabulary above this is a typing error, not a model


class ModelError(GpusimError):
    """A model name, file or field that cannot be used; the message names the file and the field."""


@attrs.frozen
class ModelConfig:
    """A decoder-only transformer: `layers` blocks of attention (RMSNorm, QKV projection, attention over `heads`
    query heads sharing `kv_heads` K/V heads of `head_dim`, output projection) and a SwiGLU MLP (RMSNorm, gate and
    up projections to `ffn`, down projection), then a final RMSNorm and the LM head over `vocab` tokens. With
    `experts` > 1 every layer's MLP is `experts` SwiGLU experts of width `ffn`, `experts_per_token` of them used per
    token (picked by a router of hidden x experts weights)."""
    name: str
    source: str  # where the numbers come from (the Hugging Face repository, or the file read)
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    dtype: str  # a DTYPE_BYTES key
    tie_embeddings: bool = False  # the LM head reuses the embedding's weights
    experts: int = 1
    experts_per_token: int = 1

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def q_width(self) -> int:
        """Columns of the query projection's output: heads x head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Columns of the key (and of the value) projection's output: kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    def to_dict(self) -> dict:
        return attrs.asdict(self)


INTEGER_FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab")
YAML_FIELDS = ("name", "source", *INTEGER_FIELDS, "dtype", "tie_embeddings", "experts", "experts_per_token")
# Hugging Face config.json key -> ours (head_dim and num_key_value_heads have defaults, as transformers gives them)
HF_FIELDS = {"num_hidden_layers": "layers", "hidden_size": "hidden", "num_attention_heads": "heads",
             "num_key_value_heads": "kv_heads", "head_dim": "head_dim", "intermediate_size": "ffn",
             "vocab_size": "vocab", "torch_dtype": "dtype", "tie_word_embeddings": "tie_embeddings",
             "num_local_experts": "experts", "num_experts_per_tok": "experts_per_token"}


def _whole(where: str, field: str, value, low: int = 1) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not low <= value <= MAX_DIMENSION:
        raise ModelError(f"{where}: {field}: expected a whole number from {low} to {MAX_DIMENSION:,}, got "
                         f"{shorten(value, 40)}")
    return int(value)


def _dtype(where: str, field: str, value, names: dict | None = None) -> str:
    known = names or {d: d for d in DTYPE_BYTES}
    if not isinstance(value, str) or value not in known:
        raise ModelError(f"{where}: {field}: expected one of {', '.join(known)}, got {shorten(value, 40)}")
    return known[value]


def check_model(where: str, fields: dict) -> ModelConfig:
    """A ModelConfig from our field names (as the YAML spells them), every value checked in one line."""
    missing = [f for f in ("layers", "hidden", "heads", "ffn", "vocab", "dtype") if f not in fields]
    if missing:
        raise ModelError(f"{where}: {missing[0]}: missing (a model gives {', '.join(YAML_FIELDS[2:10])})")
    values = {f: _whole(where, f, fields[f]) for f in INTEGER_FIELDS if f in fields}
    values.setdefault("kv_heads", values["heads"])
    if "head_dim" not in values:
        if values["hidden"] % values["heads"]:
            raise ModelError(f"{where}: head_dim: missing, and hidden {values['hidden']} is not a multiple of heads "
                             f"{values['heads']}")
        values["head_dim"] = values["hidden"] // values["heads"]
    if values["heads"] % values["kv_heads"]:
        raise ModelError(f"{where}: kv_heads: expected a divisor of heads ({values['heads']}), got "
                         f"{values['kv_heads']}")
    experts = _whole(where, "experts", fields.get("experts", 1))
    per_token = _whole(where, "experts_per_token", fields.get("experts_per_token", 1))
    if per_token > experts:
        raise ModelError(f"{where}: experts_per_token: expected at most experts ({experts}), got {per_token}")
    tied = fields.get("tie_embeddings", False)
    if not isinstance(tied, bool):
        raise ModelError(f"{where}: tie_embeddings: expected true or false, got {shorten(tied, 40)}")
    name, source = fields.get("name"), fields.get("source", where)
    for field, text in (("name", name), ("source", source)):
        if not isinstance(text, str) or not text.strip() or len(text) > 300 or not text.isprintable():
            raise ModelError(f"{where}: {field}: expected one line of text, got {shorten(text, 40)}")
    return ModelConfig(name=name, source=source, dtype=_dtype(where, "dtype", fields["dtype"]), tie_embeddings=tied,
                       experts=experts, experts_per_token=per_token, **values)


def _read(path: Path, what: str):
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"{shown(str(path), 80)}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        data = json.loads(text) if what == "json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{shown(str(path), 80)}: not valid {what.upper()} ({shorten(first, 100)})") from None
    if not isinstance(data, dict):
        raise ModelError(f"{shown(str(path), 80)}: expected a mapping of fields, got {shorten(data, 40)}")
    return data


def model_from_yaml(path: Path) -> ModelConfig:
    """A model YAML file (workloads/models/*.yaml): the fields YAML_FIELDS, no others."""
    data = _read(path, "yaml")
    where = shown(str(path), 80)
    unknown = [k for k in data if k not in YAML_FIELDS]
    if unknown:
        raise ModelError(f"{where}: {shorten(unknown[0], 40)}: unknown field (a model file has "
                         f"{', '.join(YAML_FIELDS)})")
    return check_model(where, {"name": path.stem, **data})


def model_from_hf_config(path: Path) -> ModelConfig:
    """A Hugging Face config.json: HF_FIELDS mapped to ours (other keys ignored); num_key_value_heads defaults to
    num_attention_heads and head_dim to hidden_size / num_attention_heads, as transformers gives them."""
    data = _read(path, "json")
    where = shown(str(path), 80)
    fields: dict = {}
    for hf_name, ours in HF_FIELDS.items():
        value = data.get(hf_name)
        if value is None:
            continue
        if ours == "dtype":
            value = _dtype(where, hf_name, value, HF_DTYPES)
        elif ours in INTEGER_FIELDS or ours in ("experts", "experts_per_token"):
            value = _whole(where, hf_name, value)
        fields[ours] = value
    for ours in ("layers", "hidden", "heads", "ffn", "vocab", "dtype"):
        if ours not in fields:
            hf_name = next(k for k, v in HF_FIELDS.items() if v == ours)
            raise ModelError(f"{where}: {hf_name}: missing (a Hugging Face config gives {', '.join(HF_FIELDS)})")
    name = data.get("_name_or_path")
    name = name.rstrip("/").rsplit("/", 1)[-1] if isinstance(name, str) and name.strip("/ ") else ""
    if not name:
        name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return check_model(where, {"name": name, "source": str(path), **fields})


def shipped_models() -> list[str]:
    """The names of the models under workloads/models/."""
    folder = shipped_root() / MODELS_DIR
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def load_model(model: str | Path | ModelConfig) -> ModelConfig:
    """A ModelConfig from a shipped name, a model YAML file or a Hugging Face config.json."""
    if isinstance(model, ModelConfig):
        return model
    if not isinstance(model, (str, Path)) or not str(model).strip():
        raise ModelError(f"--model {shorten(model, 40)}: expected a model name ({', '.join(shipped_models())}) or "
                         f"the path of a model YAML or a Hugging Face config.json")
    text = str(model)
    shipped = shipped_root() / MODELS_DIR / f"{text}.yaml"
    if "/" not in text and "\\" not in text and not text.endswith((".yaml", ".yml", ".json")) and shipped.is_file():
        return model_from_yaml(shipped)
    path = Path(text)
    if not path.is_file():
        raise ModelError(f"--model {shown(text, 80)}: no such model (shipped: {', '.join(shipped_models())}) and no "
                         f"such file")
    if path.suffix == ".json":
        return model_from_hf_config(path)
    return model_from_yaml(path)


__all__ = [
    "DTYPE_BYTES",
    "HF_FIELDS",
    "YAML_FIELDS",
    "ModelConfig",
    "ModelError",
    "check_model",
    "load_model",
    "model_from_hf_config",
    "model_from_yaml",
    "shipped_models",
]
