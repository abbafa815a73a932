"""The bundled sentence model as an ONNX graph, written from its weights without torch.

all-MiniLM-L6-v2 is a plain BERT encoder followed by mean pooling and L2 normalisation.
Its graph is a few dozen standard ONNX operators, so it is written here directly from the
model's ``config.json`` and ``model.safetensors`` (read with numpy) in well under a
second, instead of importing torch and transformers to trace it (about 9 s, and a
dependency of several hundred MB that the default backend then no longer needs). The
operations follow transformers' ``BertModel`` in eval mode with eager attention, as
sentence-transformers runs it: the vectors agree with the torch backend's to about 1e-6
(``tests/detectors/test_onnx_backend.py`` compares them).

``supports`` says whether a model directory is one this writer knows (a BERT with
absolute positions, erf GELU and mean pooling); for any other model the ONNX backend
traces it with torch (``onnx_encoder.export_onnx``).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

OPSET = 17  # LayerNormalization is an operator from 17 on
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _config(model_dir: Path) -> dict:
    return json.loads((model_dir / "config.json").read_text(encoding="utf-8"))


def _pooling(model_dir: Path) -> dict:
    path = model_dir / "1_Pooling" / "config.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def supports(model_dir: str | Path) -> bool:
    """Whether ``model_dir`` is a model this writer reproduces exactly."""
    model_dir = Path(model_dir)
    try:
        config, pooling = _config(model_dir), _pooling(model_dir)
    except (OSError, ValueError):
        return False
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v is True}
    return (config.get("model_type") == "bert" and config.get("hidden_act") == "gelu"
            and config.get("position_embedding_type", "absolute") == "absolute"
            and modes == {"pooling_mode_mean_tokens"} and (model_dir / "model.safetensors").is_file()
            and (model_dir / "modules.json").is_file()
            and "sentence_transformers.models.Normalize" in (model_dir / "modules.json").read_text(encoding="utf-8"))


class _Graph:
    """Nodes and initialisers, with names made up as they are added."""

    def __init__(self):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list = []
        self.inits: list = []
        self._n = 0

    def const(self, value, name: str | None = None) -> str:
        self._n += 1
        name = name or f"c{self._n}"
        self.inits.append(self.numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, kind: str, *inputs: str, **attrs) -> str:
        self._n += 1
        out = f"{kind.lower()}{self._n}"
        self.nodes.append(self.helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        # torch's Linear is x @ W.T + b: the transposed weight is kept, contiguous.
        w = self.const(np.ascontiguousarray(weight.T), f"{name}.weight_t")
        return self.op("Add", self.op("MatMul", x, w), self.const(bias, f"{name}.bias"))

    def layer_norm(self, x: str, weights: dict, name: str, eps: float) -> str:
        return self.op("LayerNormalization", x, self.const(weights[f"{name}.weight"], f"{name}.weight"),
                       self.const(weights[f"{name}.bias"], f"{name}.bias"), axis=-1, epsilon=eps)


def build(model_dir: str | Path):
    """The sentence model at ``model_dir`` (see ``supports``) as an ``onnx.ModelProto``:
    inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, batch x tokens),
    output ``embedding`` (float32, batch x hidden), each row of unit length."""
    from onnx import TensorProto, helper
    from safetensors.numpy import load_file

    model_dir = Path(model_dir)
    if not supports(model_dir):
        raise ValueError(f"{model_dir}: not a BERT sentence model with mean pooling and normalisation")
    config = _config(model_dir)
    w = {k.removeprefix("bert."): v for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    head_size = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    g = _Graph()

    # Embeddings: word + position + token type, then LayerNorm.
    ids, mask, types = _INPUTS
    tokens = g.op("Gather", g.op("Shape", ids), g.const(np.int64(1)), axis=0)
    positions = g.op("Range", g.const(np.int64(0)), tokens, g.const(np.int64(1)))
    x = g.op("Add", g.op("Add", g.op("Gather", g.const(w["embeddings.word_embeddings.weight"], "word_embeddings"), ids),
                         g.op("Gather", g.const(w["embeddings.position_embeddings.weight"], "position_embeddings"),
                              positions)),
             g.op("Gather", g.const(w["embeddings.token_type_embeddings.weight"], "token_type_embeddings"), types))
    x = g.layer_norm(x, w, "embeddings.LayerNorm", eps)

    # The additive attention mask: 0 where a token is real, the float minimum where it is padding.
    mask_f = g.op("Cast", mask, to=TensorProto.FLOAT)
    additive = g.op("Mul", g.op("Sub", g.const(np.float32(1.0)), mask_f), g.const(np.finfo(np.float32).min))
    additive = g.op("Unsqueeze", additive, g.const(np.array([1, 2], dtype=np.int64)))  # batch x 1 x 1 x tokens
    split = g.const(np.array([0, 0, heads, head_size], dtype=np.int64), "split_heads")
    merge = g.const(np.array([0, 0, hidden], dtype=np.int64), "merge_heads")
    scale = g.const(np.float32(head_size ** -0.5), "scale")
    sqrt_half = g.const(np.float32(1 / np.sqrt(2)), "sqrt_half")
    half, one = g.const(np.float32(0.5), "half"), g.const(np.float32(1.0), "one")

    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}"

        def heads_of(name: str, perm: list[int], p: str = p, x: str = x) -> str:
            proj = g.linear(x, w[f"{p}.attention.self.{name}.weight"], w[f"{p}.attention.self.{name}.bias"],
                            f"{p}.{name}")
            return g.op("Transpose", g.op("Reshape", proj, split), perm=perm)

        q = heads_of("query", [0, 2, 1, 3])
        k = heads_of("key", [0, 2, 3, 1])
        v = heads_of("value", [0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), additive)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge)
        attended = g.linear(context, w[f"{p}.attention.output.dense.weight"], w[f"{p}.attention.output.dense.bias"],
                            f"{p}.attention.output")
        x = g.layer_norm(g.op("Add", attended, x), w, f"{p}.attention.output.LayerNorm", eps)
        inner = g.linear(x, w[f"{p}.intermediate.dense.weight"], w[f"{p}.intermediate.dense.bias"], f"{p}.intermediate")
        # GELU, the exact (erf) form BERT uses.
        inner = g.op("Mul", g.op("Mul", inner, half), g.op("Add", one, g.op("Erf", g.op("Mul", inner, sqrt_half))))
        out = g.linear(inner, w[f"{p}.output.dense.weight"], w[f"{p}.output.dense.bias"], f"{p}.output")
        x = g.layer_norm(g.op("Add", out, x), w, f"{p}.output.LayerNorm", eps)

    # Mean over the real tokens (sentence-transformers clamps the count at 1e-9), then unit length
    # (torch's normalize: divided by max(norm, 1e-12)).
    weights = g.op("Unsqueeze", mask_f, g.const(np.array([-1], dtype=np.int64)))
    axis1 = g.const(np.array([1], dtype=np.int64), "axis1")
    summed = g.op("ReduceSum", g.op("Mul", x, weights), axis1, keepdims=0)
    count = g.op("Max", g.op("ReduceSum", weights, axis1, keepdims=0), g.const(np.float32(1e-9)))
    mean = g.op("Div", summed, count)
    norm = g.op("Max", g.op("ReduceL2", mean, axes=[1], keepdims=1),  # axes an attribute before opset 18
                g.const(np.float32(1e-12)))
    g.nodes.append(helper.make_node("Div", [mean, norm], ["embedding"]))

    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"]) for name in _INPUTS]
    outputs = [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])]
    graph = helper.make_graph(g.nodes, "sentence_vector", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="loopbench")
    model.ir_version = 8  # what onnxruntime 1.20 and later read
    return model
