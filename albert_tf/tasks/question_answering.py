"""SQuAD v1.1 / v2.0 span extraction (the task and its run family; the CLI
is run_squad). See albert_tf/data/squad_data.py for windowing, answer
alignment and the no-answer rule."""

import dataclasses
import os

import tensorflow as tf

from albert_tf.modeling.models import downstream_models
from albert_tf.data import finetune_features
from albert_tf.tasks import finetuning as finetune_lib
from albert_tf.tasks import metrics as finetune_metrics
from albert_tf.data import squad_checks
from albert_tf.data import squad_data
from albert_tf.serving import export_lib
from albert_tf.tasks import squad_v2_task


@dataclasses.dataclass
class SquadDataConfig(finetune_lib.FinetuningDataConfig):
  # SQuAD JSON files.
  train_file: str = ""
  predict_file: str = ""
  version_2_with_negative: bool = False
  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  null_score_diff_threshold: float = 0.0


@dataclasses.dataclass
class SquadExperimentConfig(finetune_lib.FinetuningExperimentConfig):
  data: SquadDataConfig = dataclasses.field(default_factory=SquadDataConfig)


class SquadTask(finetune_lib.FinetuneTask):
  """Span extraction (+ answerability for SQuAD 2.0)."""

  kind = "question_answering"
  index_key = "unique_ids"
  in_loop_eval = False  # dev windows carry no span labels

  def __init__(self, config, model_dir):
    super().__init__(config, model_dir)
    squad_v2_task.validate_config(config)
    self.v2 = self.data.version_2_with_negative
    self.answerability = config.task.with_answerability
    self.xlnet_head = squad_v2_task.uses_xlnet_head(config)

  def build_model(self):
    if self.xlnet_head:
      return squad_v2_task.build_model(self)
    return downstream_models.AlbertSpanLabeler(
        self.encoder(), with_answerability=self.answerability,
        dropout_rate=self.config.task.classifier_dropout)

  def initialize(self, model):
    if self.xlnet_head:
      return squad_v2_task.initialize(self, model)
    return super().initialize(model)

  def restore_for_inference(self, trainer, path):
    if self.xlnet_head:
      return squad_v2_task.restore_for_inference(trainer, path)
    return super().restore_for_inference(trainer, path)

  def feature_spec(self):
    return squad_data.feature_spec(self.data.max_seq_length)

  def _fingerprint(self, path):
    d = self.data
    return finetune_features.fingerprint(
        [path], self.tokenizer, max_seq_length=d.max_seq_length,
        doc_stride=d.doc_stride, max_query_length=d.max_query_length,
        v2=self.v2)

  def _split_file(self, split):
    """(path, is_training): "train" is data.train_file, any other split
    data.predict_file."""
    if split == self.train_split:
      return self.data.train_file, True
    return self.data.predict_file, False

  def task_facts(self):
    d = self.data
    return {"serving_task": "squad",
            "with_answerability": self.answerability,
            "version_2_with_negative": self.v2,
            "max_answer_length": d.max_answer_length,
            "max_query_length": d.max_query_length,
            "doc_stride": d.doc_stride,
            "squad_head": self.config.task.squad_head}

  def read_examples(self, split):
    path, is_training = self._split_file(split)
    self.check_data_files(is_training)
    stats = squad_data.ReadStats()
    examples = squad_data.read_squad_examples(path, is_training, self.v2,
                                              stats)
    return examples

  def cached_records(self, split, examples=None):
    """Cached windows -> (tfrecord path, metadata with windows/tokens)."""
    path, is_training = self._split_file(split)
    name = "train" if is_training else "eval"
    out = os.path.join(self.cache_dir,
                       f"squad_{name}_{self._fingerprint(path)}.tf_record")

    def build(dest):
      exs = examples if examples is not None else self.read_examples(split)
      windows = []

      def features():
        for feats, meta in squad_data.convert_examples(
            exs, self.tokenizer, self.data.max_seq_length,
            self.data.doc_stride, self.data.max_query_length, is_training):
          if not is_training:
            windows.append(meta)
          yield feats

      def metadata():  # windows are collected while records are written
        if is_training:
          return {"num_examples": len(exs)}
        return {"num_examples": len(exs), "windows": windows,
                "tokens": squad_data.example_metadata(exs,
                                                      self.tokenizer)}

      finetune_features.write_records(dest, features(), metadata)
    return finetune_features.cached_records(out, build)

  def check_data_files(self, training):
    path = self.data.train_file if training else self.data.predict_file
    what = "train_file" if training else "predict_file"
    if not path or not os.path.isfile(path):
      raise FileNotFoundError(f"SQuAD data.{what} not found: {path!r} "
                              f"(--{what})")

  def compute_sums(self, model, features, training):
    if self.xlnet_head:
      return squad_v2_task.compute_sums(self, model, features, training)
    outputs = model(self.model_inputs(features), training=training)
    w = self.valid(features)
    start, end = features["start_positions"], features["end_positions"]
    loss = 0.5 * (
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            start, outputs["start_logits"]) +
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            end, outputs["end_logits"]))  # [batch]
    if "answerable_logits" in outputs:
      answerable = tf.cast(1 - features["is_impossible"], tf.float32)
      loss += tf.nn.sigmoid_cross_entropy_with_logits(
          answerable, outputs["answerable_logits"])
    hit_s = tf.cast(tf.equal(tf.argmax(outputs["start_logits"], -1,
                                       output_type=tf.int32), start),
                    tf.float32)
    hit_e = tf.cast(tf.equal(tf.argmax(outputs["end_logits"], -1,
                                       output_type=tf.int32), end),
                    tf.float32)
    return {"loss_sum": tf.reduce_sum(w * loss), "count": tf.reduce_sum(w),
            "start_correct": tf.reduce_sum(w * hit_s),
            "end_correct": tf.reduce_sum(w * hit_e)}

  def metrics_from_sums(self, sums):
    count = tf.maximum(sums["count"], 1.0)
    return {"loss": sums["loss_sum"] / count,
            "start_accuracy": sums["start_correct"] / count,
            "end_accuracy": sums["end_correct"] / count}

  def raw_predictions(self, trainer, output_fn):
    """(examples, eval metadata, unique id -> output_fn's numpy outputs)."""
    examples = self.read_examples(self.eval_split)
    path, meta = self.cached_records(self.eval_split, examples)
    raw = finetune_lib.predict_records(
        trainer, path, self.feature_spec(), meta["num_records"],
        self.eval_batch_size, self.index_key, output_fn)
    return examples, meta, raw

  def write_predictions(self, output_dir, predictions, nbest, null_odds):
    os.makedirs(output_dir, exist_ok=True)
    files = [os.path.join(output_dir, "predictions.json"),
             os.path.join(output_dir, "nbest_predictions.json")]
    squad_data.write_json(files[0], predictions)
    squad_data.write_json(files[1], nbest)
    if self.v2:
      files.append(os.path.join(output_dir, "null_odds.json"))
      squad_data.write_json(files[2], null_odds)
    return files

  def predict_answers(self, trainer, output_dir):
    """Predictions for data.predict_file; writes the three JSON files."""
    if self.xlnet_head:
      return squad_v2_task.predict_answers(self, trainer, output_dir)

    def output_fn(model, features):
      out = model(self.model_inputs(features), training=False)
      return {k: out[k] for k in ("start_logits", "end_logits",
                                  "answerable_logits") if k in out}

    examples, meta, raw = self.raw_predictions(trainer, output_fn)
    results = {
        uid: squad_data.WindowResult(
            r["start_logits"], r["end_logits"],
            float(r["answerable_logits"]) if "answerable_logits" in r
            else None) for uid, r in raw.items()}
    d = self.data
    predictions, null_odds, nbest = squad_data.postprocess(
        examples, meta["windows"], meta["tokens"], results,
        n_best_size=d.n_best_size, max_answer_length=d.max_answer_length,
        version_2_with_negative=self.v2,
        null_score_diff_threshold=d.null_score_diff_threshold)
    files = self.write_predictions(output_dir, predictions, nbest, null_odds)
    return predictions, null_odds, files

  def evaluate(self, trainer, output_dir):
    dataset = squad_checks.load_json(self.data.predict_file)["data"]
    if self.xlnet_head:  # the original's evaluate_v2 (tuned threshold)
      metrics = squad_v2_task.evaluate(self, trainer, output_dir, dataset)
      metrics["step"] = int(trainer.global_step.numpy())
      return metrics
    predictions, null_odds, _ = self.predict_answers(trainer, output_dir)
    metrics = finetune_metrics.squad_metrics(
        dataset, predictions, null_odds if self.v2 else None)
    metrics["step"] = int(trainer.global_step.numpy())
    return metrics

  def predict(self, trainer, output_dir):
    return self.predict_answers(trainer, output_dir)[2]

  def export(self, model, export_dir):
    d = self.data
    return export_lib.export_serving(
        model, export_dir, d.spm_model_file, seq_length=d.max_seq_length,
        do_lower_case=d.do_lower_case, max_answer_length=d.max_answer_length,
        max_query_length=d.max_query_length, doc_stride=d.doc_stride,
        null_score_diff_threshold=(d.null_score_diff_threshold
                                   if self.xlnet_head else None))

