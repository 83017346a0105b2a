r"""The demo's SavedModel consumer: a fresh process, no albert_tf import.

Run as a script (`python examples/demo/savedmodel_client.py ...`) so that only
TensorFlow, TensorFlow Text and sentencepiece are imported: it proves the
exports are self-contained, as they would be behind TF Serving.

  fill_mask  pretraining export (`mlm` signature): masks words of held-out
             sentences, prints the top predictions next to the truth and the
             top-1 / top-5 accuracy over all masked words.
  classify   serving export (`serving_default`, text or text_a/text_b ->
             label): classifies the rows of a GLUE TSV (MRPC or SST-2
             layout) and prints a few with the truth, plus the accuracy.

Each writes a JSON result file (--output_json).
"""

import argparse
import glob
import json
import os
import random
import sys
import time
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (registers ops)


def version_dir(path):
  """`path` after checking it is one SavedModel version directory.

  Picking a version is albert_tf.checkpoints.paths' job (this script does
  not import albert_tf); the demo passes the directory the export wrote.
  """
  if not os.path.exists(os.path.join(path, "saved_model.pb")):
    raise SystemExit(f"ERROR: {path}: no saved_model.pb; pass the version "
                     "directory the export printed (<export_dir>/<version>)")
  return path


def normalize(text):
  # Same steps as data_prep.tokenization.normalize_text (lowercased).
  out = " ".join(text.split()).replace("``", '"').replace("''", '"')
  out = unicodedata.normalize("NFKD", out)
  out = "".join(c for c in out if not unicodedata.combining(c))
  return out.lower()


def _word(piece):
  # A bare word-start piece is shown as itself, else without the marker.
  return piece.lstrip("\u2581") or piece


def fill_mask(args):
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  path = version_dir(args.export_dir)
  t0 = time.time()
  model = tf.saved_model.load(path)
  mlm = model.signatures["mlm"]
  spm_files = glob.glob(os.path.join(path, "assets", "*.model"))
  if not spm_files:
    raise SystemExit(f"ERROR: {path}/assets holds no SentencePiece .model")
  sp = spm.SentencePieceProcessor(model_file=spm_files[0])
  print(f"loaded {path} in {time.time() - t0:.1f} s "
        f"(signatures: {sorted(model.signatures)}; vocabulary "
        f"{sp.get_piece_size()} pieces from {os.path.basename(spm_files[0])})",
        flush=True)
  cls_id, sep_id, mask_id = (sp.piece_to_id(p) for p in
                             ("[CLS]", "[SEP]", "[MASK]"))
  with open(args.sentences_file, encoding="utf-8") as f:
    sentences = [l.strip() for l in f if l.strip()]
  rng = random.Random(args.seed)
  rows = []  # (sentence, ids, positions, truths)
  max_pieces = args.seq_length - 2
  for s in sentences:
    ids = sp.encode(normalize(s))
    if len(ids) < 6 or len(ids) > max_pieces:
      continue
    # Maskable: whole words of one piece (so the truth is a word).
    pieces = [sp.id_to_piece(t) for t in ids] + ["\u2581"]
    cands = [i for i, p in enumerate(pieces[:-1])
             if p.startswith("\u2581") and p[1:].isalpha() and
             not pieces[i + 1][:1].isalpha()]  # next piece starts a new word
    if not cands:
      continue
    k = max(1, min(args.masks_per_sentence, int(round(len(ids) * 0.15))))
    chosen = sorted(rng.sample(cands, min(k, len(cands))))
    rows.append((s, ids, chosen))
  if not rows:
    raise SystemExit("ERROR: no held-out sentence fits the model")
  rows = rows[:args.max_sentences]
  seq, num_pred = args.seq_length, args.masks_per_sentence
  word_ids = np.zeros((len(rows), seq), np.int32)
  mask = np.zeros_like(word_ids)
  positions = np.zeros((len(rows), num_pred), np.int32)
  for r, (_, ids, chosen) in enumerate(rows):
    full = [cls_id] + [mask_id if i in chosen else t
                       for i, t in enumerate(ids)] + [sep_id]
    word_ids[r, :len(full)] = full
    mask[r, :len(full)] = 1
    positions[r, :len(chosen)] = [i + 1 for i in chosen]  # after [CLS]
  t0 = time.time()
  logits = mlm(input_word_ids=tf.constant(word_ids),
               input_mask=tf.constant(mask),
               input_type_ids=tf.zeros_like(word_ids),
               masked_lm_positions=tf.constant(positions))["mlm_logits"]
  probs = tf.nn.softmax(logits, axis=-1).numpy()  # [batch, P, vocab]
  elapsed = time.time() - t0
  top1 = top5 = total = 0
  examples = []
  for r, (s, ids, chosen) in enumerate(rows):
    shown = []
    for p, i in enumerate(chosen):
      order = np.argsort(-probs[r, p])[:5]
      truth = ids[i]
      total += 1
      top1 += int(order[0] == truth)
      top5 += int(truth in order)
      shown.append({
          "truth": sp.id_to_piece(truth).lstrip("\u2581"),
          "top": [(_word(sp.id_to_piece(int(o))),
                   round(float(probs[r, p, o]), 3)) for o in order[:3]]})
    masked_text = "".join(
        "\u2581[MASK]" if i in chosen else sp.id_to_piece(t)
        for i, t in enumerate(ids)).replace("\u2581", " ").strip()
    examples.append({"sentence": s, "masked": masked_text,
                     "predictions": shown})
  print(f"{len(rows)} held-out sentences, {total} masked words, "
        f"forward pass {elapsed:.2f} s", flush=True)
  for ex in examples[:args.show]:
    print(f"  {ex['masked']}")
    for pr in ex["predictions"]:
      tops = ", ".join(f"{w} {p:.2f}" for w, p in pr["top"])
      mark = "ok" if pr["top"][0][0] == pr["truth"] else "  "
      print(f"    [{mark}] truth: {pr['truth']:<12} model: {tops}")
  result = {"export": path, "sentences": len(rows), "masked_words": total,
            "top1_accuracy": top1 / total, "top5_accuracy": top5 / total,
            "examples": examples[:args.show]}
  print(f"fill-mask top-1 accuracy {result['top1_accuracy']:.3f}, top-5 "
        f"{result['top5_accuracy']:.3f} over {total} masked words", flush=True)
  write_json(args.output_json, result)


def read_pairs(tsv):
  """[(text_a, text_b, label)] of a labelled TSV: the MRPC layout (a text
  pair) or the SST-2 layout (`sentence`, `label`: text_b is None)."""
  with open(tsv, encoding="utf-8") as f:
    header = f.readline().rstrip("\n").split("\t")
    col = {n: i for i, n in enumerate(header)}
    pair = "#1 String" in col
    a, b, label = ((col["#1 String"], col["#2 String"], col["Quality"]) if pair
                   else (col["sentence"], None, col["label"]))
    out = []
    for line in f:
      fields = line.rstrip("\n").split("\t")
      if len(fields) == len(header):
        out.append((fields[a], fields[b] if pair else None, fields[label]))
  return out


def text_inputs(texts_a, texts_b):
  """The serving signature's inputs: `text` for one text field (texts_b all
  None), else `text_a` and `text_b`."""
  if all(b is None for b in texts_b):
    return {"text": texts_a}
  return {"text_a": texts_a, "text_b": texts_b}


def batch1_latency_ms(call, pairs, count=50, warmup=3):
  """p50 milliseconds of `call([a], [b])` over the first `count` pairs."""
  times = []
  for i, (a, b, _) in enumerate(pairs[:count + warmup]):
    t0 = time.perf_counter()
    call([a], [b])
    if i >= warmup:
      times.append((time.perf_counter() - t0) * 1000)
  return float(np.median(times)) if times else None


def classify_pairs(path, call, pairs, label_names, show):
  """Scores `pairs` with `call(texts_a, texts_b) -> (labels, probabilities)`
  in batches of 64; prints a few; returns the result dict."""
  t0 = time.time()
  labels, probs = [], []
  for start in range(0, len(pairs), 64):
    chunk = pairs[start:start + 64]
    chunk_labels, chunk_probs = call([a for a, _, _ in chunk],
                                     [b for _, b, _ in chunk])
    # An export labelled with the task's ids ("0", "1") is shown by name.
    labels += [label_names[int(l)] if l.decode().isdigit() else l.decode()
               for l in chunk_labels]
    probs += chunk_probs.tolist()
  elapsed = time.time() - t0
  truths = [label_names[int(t)] for _, _, t in pairs]
  correct = sum(p == t for p, t in zip(labels, truths))
  print(f"{len(pairs)} rows classified from raw text in {elapsed:.2f} s "
        f"({len(pairs) / max(elapsed, 1e-9):.0f} rows/s)", flush=True)
  examples = []
  for (a, b, _), label, truth, p in list(zip(pairs, labels, truths,
                                              probs))[:show]:
    mark = "ok" if label == truth else "  "
    text = f"{a[:100]!r}" if b is None else f"A: {a[:60]!r}  B: {b[:60]!r}"
    print(f"  [{mark}] {label:<9} p={max(p):.2f}  truth {truth:<9} {text}")
    examples.append({"text_a": a, "text_b": b, "label": label,
                     "truth": truth, "probabilities": p})
  latency = batch1_latency_ms(call, pairs)
  result = {"export": path, "examples_scored": len(pairs),
            "accuracy": correct / len(pairs), "examples": examples,
            "labels": labels, "pairs_per_second": len(pairs) / elapsed,
            "batch1_p50_ms": latency,
            "predicted_label_counts": {n: labels.count(n)
                                       for n in label_names}}
  print(f"serving accuracy {result['accuracy']:.3f} over {len(pairs)} "
        f"rows (predicted: {result['predicted_label_counts']}); one row "
        f"at a time: p50 {latency:.2f} ms", flush=True)
  return result


def classify(args):
  path = version_dir(args.export_dir)
  t0 = time.time()
  model = tf.saved_model.load(path)
  serve = model.signatures["serving_default"]
  print(f"loaded {path} in {time.time() - t0:.1f} s (inputs: "
        f"{sorted(serve.structured_input_signature[1])}, outputs: "
        f"{sorted(serve.structured_outputs)})", flush=True)

  def call(texts_a, texts_b):
    out = serve(**{k: tf.constant(v)
                   for k, v in text_inputs(texts_a, texts_b).items()})
    return out["label"].numpy(), out["probabilities"].numpy()

  write_json(args.output_json, classify_pairs(
      path, call, read_pairs(args.tsv), args.label_names.split(","),
      args.show))


def write_json(path, value):
  if path:
    with open(path, "w", encoding="utf-8") as f:
      json.dump(value, f, indent=2)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  sub = parser.add_subparsers(dest="command", required=True)
  p = sub.add_parser("fill_mask", help="masked-word predictions")
  p.add_argument("--export_dir", required=True,
                 help="pretraining export version dir (<export_dir>/<version>)")
  p.add_argument("--sentences_file", required=True,
                 help="text, one sentence per line")
  p.add_argument("--seq_length", type=int, default=64,
                 help="longest input (pieces + [CLS] [SEP])")
  p.add_argument("--masks_per_sentence", type=int, default=2,
                 help="words masked per sentence (at most)")
  p.add_argument("--max_sentences", type=int, default=256,
                 help="sentences scored")
  p.add_argument("--show", type=int, default=5, help="sentences printed")
  p.add_argument("--seed", type=int, default=0, help="which words to mask")
  p.add_argument("--output_json", help="result file")
  p.set_defaults(fn=fill_mask)
  c = sub.add_parser("classify", help="text (or text pair) -> label")
  c.add_argument("--export_dir", required=True,
                 help="serving export version dir (<export_dir>/<version>)")
  c.add_argument("--tsv", required=True,
                 help="MRPC- or SST-2-layout TSV with labels")
  c.add_argument("--label_names", default="0,1",
                 help="names of label ids 0,1,... (as exported)")
  c.add_argument("--show", type=int, default=6, help="pairs printed")
  c.add_argument("--output_json", help="result file")
  c.set_defaults(fn=classify)
  args = parser.parse_args(argv)
  args.fn(args)
  return 0


if __name__ == "__main__":
  sys.exit(main())
