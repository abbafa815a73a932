"""Where a cold ``loopbench run`` spends its embedding seconds, per backend, and how far the backends drift.

Run: ``python bench/bench_cold_start.py [--sample 3000] [--backends torch,torch-bf16,onnx,onnx-int8,openvino-bf16]``
(a few minutes on 2 cores). Every figure is measured when the script runs.

1. the texts of the default suite that the model-backed detectors (``embedding``,
   ``embedding_call``, ``progress_guard``) ask to encode in their open-loop prefetch:
   per detector, summed, and distinct over all three (what one shared cache encodes);
2. word pieces: real, and fed to the model with padding, for batches of 64 in the order
   the texts come and sorted by length;
3. per backend, in a fresh process each: imports, model load (the ONNX export or int8
   quantisation, when its file is not on disk yet, is timed apart), tokenisation, forward
   passes on a random sample of the distinct texts (wall and CPU seconds), texts/s, and the
   projection to all distinct texts;
4. drift against torch (or the first backend listed) on the sample: cosine of each text's vector with its torch vector,
   and for random pairs of texts the change of their similarity, with the number of pairs
   that cross the detectors' thresholds (0.8 progress_guard, 0.85 embedding_call, 0.97 embedding) either way.

Wall seconds depend on what else runs on the machine (the load average is printed); CPU
seconds much less so.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

THRESHOLDS = (0.8, 0.85, 0.97)


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(t: tuple[float, float]) -> dict:
    w, c = clock()
    return {"wall_s": round(w - t[0], 3), "cpu_s": round(c - t[1], 3)}


def suite_texts() -> dict[str, list[str]]:
    """The texts each model-backed detector's prefetch sends to the model on the default suite."""
    from detectors.embedding import CallEmbeddingDetector, EmbeddingDetector
    from detectors.embedding_model import Embedder
    from detectors.progress_guard import ProgressGuard
    from scenarios.suites import load_suite
    from sim.execute.runner import build_scenarios, generate_episodes

    suite = load_suite("default")
    episodes = generate_episodes(build_scenarios(suite.families, suite.episodes, suite.seed, suite.family_params))
    calls = [n.call for ep in episodes for n in ep.tool_nodes()]
    out: dict[str, list[str]] = {}
    for name, cls in (("embedding", EmbeddingDetector), ("embedding_call", CallEmbeddingDetector),
                      ("progress_guard", ProgressGuard)):
        asked: list[str] = []

        def record(texts: list[str], asked: list[str] = asked) -> np.ndarray:
            asked.extend(texts)
            return np.ones((len(texts), 1), dtype=np.float32)

        cls(embedder=Embedder(encode=record, model_name="recorder")).prefetch(calls)
        out[name] = asked
    return out


def padding(lengths: np.ndarray, batch: int) -> int:
    return sum(int(lengths[i : i + batch].max()) * len(lengths[i : i + batch]) for i in range(0, len(lengths), batch))


# -- one backend, in its own process ------------------------------------------------------------
def worker(backend: str, texts_file: str, vectors_file: str) -> None:
    texts = json.loads(Path(texts_file).read_text())
    report: dict = {"backend": backend}
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from detectors import embedding_model as em

    path = em.bundled_model_path()
    if backend.startswith("torch"):
        t = clock()
        import sentence_transformers  # noqa: F401
        import torch  # noqa: F401

        report["import"] = since(t)
        t = clock()
        model = em.load_model(path)
        report["load"] = since(t)
        tokenizer = model.tokenizer
        t = clock()
        tokenizer([s.strip() for s in texts], truncation=True, max_length=model.max_seq_length)
        report["tokenise"] = since(t)
        t = clock()
        with em.encode_precision(backend):
            vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        report["encode"] = since(t)
    else:
        from detectors.onnx_encoder import OnnxEncoder, onnx_file

        t = clock()
        if backend.startswith("openvino"):
            import openvino  # noqa: F401
        else:
            import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401

        report["import"] = since(t)
        onnx_dir = os.environ.get(em.ONNX_DIR_ENV) or None
        t = clock()
        file = onnx_file(path, em.model_id(path), backend == "onnx-int8", onnx_dir)
        report["export"] = since(t)  # ~0 when the file was already there
        t = clock()
        encoder = OnnxEncoder(path, file, em.torch_threads(), runtime=em.onnx_runtime(backend))
        encoder.session()
        report["load"] = since(t)
        t = clock()
        encoder.tokenizer.encode_batch([s.strip() for s in texts])
        report["tokenise"] = since(t)
        t = clock()
        vectors = encoder(texts)
        report["encode"] = since(t)
    np.save(vectors_file, em.normalise(vectors))
    print(json.dumps(report))


def run_backend(backend: str, texts_file: Path, vectors_file: Path) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--worker", backend, str(texts_file), str(vectors_file)],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"{backend} failed: {proc.stderr.strip()[-1500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def drift(ref: np.ndarray, other: np.ndarray, pairs: int, seed: int = 0) -> dict:
    own = (ref * other).sum(1)
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(ref), pairs)
    b = rng.integers(0, len(ref), pairs)
    s_ref = (ref[a] * ref[b]).sum(1)
    s_oth = (other[a] * other[b]).sum(1)
    delta = np.abs(s_ref - s_oth)
    crossed = {str(t): int(((s_ref >= t) != (s_oth >= t)).sum()) for t in THRESHOLDS}
    near = {str(t): int((np.abs(s_ref - t) < 0.01).sum()) for t in THRESHOLDS}
    return {"self_cos_min": float(own.min()), "self_cos_mean": float(own.mean()),
            "pair_delta_max": float(delta.max()), "pair_delta_p99": float(np.quantile(delta, 0.99)),
            "pairs": pairs, "pairs_crossing": crossed, "pairs_within_0.01_of_threshold": near}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=3000, help="distinct texts encoded per backend (0 = all)")
    ap.add_argument("--backends", default="torch,torch-bf16,onnx,onnx-int8,openvino-bf16")
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return
    print(f"cpus={os.cpu_count()}  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    t = clock()
    texts = suite_texts()
    print(f"default suite generated and its texts collected in {since(t)['wall_s']:.1f} s")
    union = list(dict.fromkeys(t for v in texts.values() for t in v))
    for name, asked in texts.items():
        print(f"  {name:15s} asks {len(asked):6d} texts ({len(set(asked))} distinct)")
    total = sum(len(v) for v in texts.values())
    print(f"  summed {total}; distinct over the three {len(union)} "
          f"({100 * (1 - len(union) / total):.0f}% duplicates across detectors, encoded once by the shared cache)")

    from detectors.embedding_model import bundled_model_path
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(bundled_model_path() / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(256)
    lengths = np.array([len(e.ids) for e in tok.encode_batch([s.strip() for s in union])])
    real = int(lengths.sum())
    print(f"word pieces: {real} real (mean {lengths.mean():.1f}, p50 {np.median(lengths):.0f}, max {lengths.max()}); "
          f"fed with padding, batches of 64: arrival order {padding(lengths, 64)} "
          f"(x{padding(lengths, 64) / real:.2f}), length-sorted {padding(np.sort(lengths)[::-1], 64)} "
          f"(x{padding(np.sort(lengths)[::-1], 64) / real:.2f})")

    sample = list(union)
    random.Random(0).shuffle(sample)
    if args.sample:
        sample = sample[: args.sample]
    scale = len(union) / len(sample)
    tmp = Path(tempfile.mkdtemp(prefix="loopbench-cold-"))
    (tmp / "texts.json").write_text(json.dumps(sample))
    vectors: dict[str, np.ndarray] = {}
    print(f"\nper backend, a fresh process each, {len(sample)} distinct texts "
          f"(projection x{scale:.2f} to all {len(union)}); seconds wall / cpu")
    for backend in args.backends.split(","):
        r = run_backend(backend, tmp / "texts.json", tmp / f"{backend}.npy")
        vectors[backend] = np.load(tmp / f"{backend}.npy")
        parts = ["import", "export", "load", "tokenise", "encode"]
        cells = "  ".join(f"{p} {r[p]['wall_s']:.1f}/{r[p]['cpu_s']:.1f}" for p in parts if p in r)
        rate = len(sample) / r["encode"]["wall_s"]
        print(f"  {backend:9s} {cells}  -> {rate:.0f} texts/s; all distinct texts ~{r['encode']['wall_s'] * scale:.0f} s "
              f"wall, {r['encode']['cpu_s'] * scale:.0f} s cpu")
    # Drift against torch, the reference, or else against the first backend measured.
    ref = "torch" if "torch" in vectors else next(iter(vectors))
    if len(vectors) > 1:
        print(f"\ndrift against {ref} (same texts):")
        for backend, vec in vectors.items():
            if backend != ref:
                d = drift(vectors[ref], vec, args.pairs)
                print(f"  {backend:9s} cos(text, {ref}) min {d['self_cos_min']:.5f} mean {d['self_cos_mean']:.6f}; "
                      f"pair similarity |delta| max {d['pair_delta_max']:.5f} p99 {d['pair_delta_p99']:.5f}; "
                      f"of {d['pairs']} pairs, crossing a threshold {d['pairs_crossing']} "
                      f"(within 0.01 of it: {d['pairs_within_0.01_of_threshold']})")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
