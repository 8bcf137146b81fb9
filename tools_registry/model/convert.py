"""Converts all-MiniLM-L6-v2 (safetensors + vocab.txt) into the model file discovery embeds.

    python3 convert.py MODEL_DIR OUT      # needs numpy and safetensors

MODEL_DIR holds the upstream `model.safetensors`, `vocab.txt` and `config.json`; SOURCE.md
says where they came from and their SHA-256. The output is what `src/discovery/semantic/
model_file.rs` reads: the magic `CEMSENT1`, a little-endian u32 header length, a JSON header
(architecture, tensor table, SHA-256 of the payload), then the payload: the vocabulary, then
each tensor. Matrices (the word embeddings and every dense layer) are int8 with one f32 scale
per row (symmetric: scale = max |w| / 127); vectors, position embeddings and layer norms stay
f32. The conversion is deterministic: the same input gives the same bytes.
"""
import hashlib, json, struct, sys
import numpy as np
from safetensors.numpy import load_file

QUANTIZED = ("word_embeddings.weight", "query.weight", "key.weight", "value.weight", "dense.weight")


def quantize(w):
    w = w.astype(np.float32)
    scale = np.abs(w).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
    return q.tobytes() + scale.astype("<f4").tobytes()


def main(model_dir, out):
    weights = load_file(f"{model_dir}/model.safetensors")
    config = json.load(open(f"{model_dir}/config.json"))
    vocab = open(f"{model_dir}/vocab.txt", "rb").read()
    payload = bytearray(vocab)
    tensors = []
    for name in sorted(weights):
        if name.endswith("position_ids"):
            continue
        w = weights[name]
        kind = "q8" if name.endswith(QUANTIZED) and w.ndim == 2 else "f32"
        data = quantize(w) if kind == "q8" else w.astype("<f4").tobytes()
        tensors.append({"name": name, "shape": list(w.shape), "kind": kind,
                        "offset": len(payload), "len": len(data)})
        payload += data
    header = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "hidden": config["hidden_size"], "layers": config["num_hidden_layers"],
        "heads": config["num_attention_heads"], "intermediate": config["intermediate_size"],
        "max_positions": config["max_position_embeddings"], "layer_norm_eps": config["layer_norm_eps"],
        "vocab_bytes": len(vocab), "tensors": tensors,
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    with open(out, "wb") as f:
        f.write(b"CEMSENT1" + struct.pack("<I", len(head)) + head + payload)


if __name__ == "__main__":
    main(*sys.argv[1:3])
