"""SQuAD v1.1 / v2.0 span extraction (the task and its run family; the CLI
is run_squad). See albert_tf/data/squad_data.py for windowing, answer
alignment and the no-answer rule."""

import dataclasses
import os

from albert_tf.core.settings import DATA_POSITION, SAFE, setting
from albert_tf.data import squad_checks
from albert_tf.data import squad_data
from albert_tf.serving import preprocessing
from albert_tf.serving import serving_params
from albert_tf.tasks import finetuning as finetune_lib
from albert_tf.tasks import registry
from albert_tf.tasks import squad_heads
from albert_toolkit import output_files


@dataclasses.dataclass
class SquadDataConfig(finetune_lib.FinetuningDataConfig):
  train_file: str = setting("", resume=DATA_POSITION,
                            flag="SQuAD training JSON (data.train_file).")
  predict_file: str = setting("", resume=SAFE, flag="SQuAD JSON to "
                              "evaluate / predict (data.predict_file).")
  version_2_with_negative: bool = setting(
      False, flag="SQuAD 2.0 (unanswerable questions; "
      "data.version_2_with_negative). squad_v2.0.yaml uses the original's "
      "head (task.squad_head=xlnet); the simple head takes "
      "task.with_answerability.")
  # Windows over contexts longer than one sequence (0: one window, the
  # context cut; the xlnet head's export needs windows).
  doc_stride: int = setting(128, serving=True, export=True,
                            flag="SQuAD: window stride over long contexts "
                            "(data.doc_stride; 0 truncates: one window per "
                            "question, the context cut to fit).")
  max_query_length: int = setting(64, serving=True, flag="SQuAD: question "
                                  "tokens kept (data.max_query_length).")
  n_best_size: int = setting(20, resume=SAFE)
  max_answer_length: int = setting(30, resume=SAFE, serving=True,
                                   export=True, flag="SQuAD: longest answer "
                                   "(data.max_answer_length).")
  null_score_diff_threshold: float = setting(
      0.0, resume=SAFE, serving=True, export=True, flag="v2.0: answer \"\" "
      "when null_odds exceeds this (data.null_score_diff_threshold; use the "
      "best_f1_thresh of an eval run; with task.squad_head=xlnet: when the "
      "null score reaches it, the eval's null_score_diff_threshold).")


@dataclasses.dataclass
class SquadTaskConfig(finetune_lib.FinetuningTaskConfig):
  """The span head (squad_heads.py)."""
  # "simple" (start/end dense) or "xlnet" (the original run_squad_v2.py
  # head: end conditioned on the start, beam of start_n_top x end_n_top,
  # answer class; SQuAD 2.0 only).
  squad_head: str = setting("simple", serving=True)
  # SQuAD 2.0 with the simple head: an answerability logit on [CLS].
  with_answerability: bool = setting(False, serving=True,
                                     flag="SQuAD 2.0 simple head "
                                     "(task.with_answerability).")
  start_n_top: int = setting(5, serving=True)
  end_n_top: int = setting(5, serving=True)


@dataclasses.dataclass
class SquadTrainerConfig(finetune_lib.FinetuningTrainerConfig):
  # No in-loop evaluation (dev windows carry no span labels): no best
  # checkpoint to keep.
  best_metric: str = setting("", resume=SAFE)


@dataclasses.dataclass
class SquadExperimentConfig(finetune_lib.FinetuningExperimentConfig):
  data: SquadDataConfig = dataclasses.field(default_factory=SquadDataConfig)
  task: SquadTaskConfig = dataclasses.field(default_factory=SquadTaskConfig)
  trainer: SquadTrainerConfig = dataclasses.field(
      default_factory=SquadTrainerConfig)

  def validate_data(self):
    """Raises ValueError naming the first bad data field, or a setting that
    would be read and ignored (SQuAD 2.0's in a v1.1 run, the xlnet head's
    beam with the simple head)."""
    super().validate_data()
    d, t = self.data, self.task
    if d.doc_stride < 0:
      raise ValueError(f"data.doc_stride must be >= 0 (0: one window per "
                       f"question), got {d.doc_stride}")
    if not d.version_2_with_negative:
      for name, value, default in (
          ("data.null_score_diff_threshold", d.null_score_diff_threshold,
           SquadDataConfig.null_score_diff_threshold),
          ("task.with_answerability", t.with_answerability,
           SquadTaskConfig.with_answerability)):
        if value != default:
          raise ValueError(
              f"{name} (--{name.split('.')[1]}) is {value!r} but applies "
              "only to SQuAD 2.0 (--version_2_with_negative); omit it")
    xlnet = squad_heads.XlnetHead.name
    if t.squad_head != xlnet:
      for name in ("start_n_top", "end_n_top"):
        if getattr(t, name) != getattr(SquadTaskConfig, name):
          raise ValueError(
              f"task.{name} is {getattr(t, name)} but applies only with "
              f"task.squad_head={xlnet} (its beam); omit it")


@serving_params.view_of(SquadExperimentConfig)
class SquadServingParams(serving_params.ServingParams):
  """Export settings: the head, how text is packed and windowed, how spans
  are decoded (the config's), and how many windows an export takes."""
  max_windows: int = setting(32, export=True, flag="SQuAD export with "
                             "doc-stride windows: longer contexts are "
                             "refused with an error (default 32).")

  def validate(self):
    super().validate()
    if self.squad_head not in squad_heads.HEADS:
      raise ValueError(f"squad_head must be one of {sorted(squad_heads.HEADS)}"
                       f", got {self.squad_head!r}")
    for name in ("max_query_length", "max_windows", "max_answer_length"):
      if getattr(self, name) <= 0:
        raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
    if self.doc_stride < 0:
      raise ValueError(f"doc_stride must be >= 0, got {self.doc_stride}")
    # As squad_data.doc_windows: the question is packed as a capped first
    # segment, the context needs at least one token.
    preprocessing.check_first_segment_cap(
        self.max_query_length, self.max_seq_length, "--max_query_length",
        "the context")


  def check_given(self, given):
    if "max_windows" in given and not self.doc_stride:
      raise ValueError("--max_windows applies to doc-stride windows only, "
                       "not --doc_stride=0 (one window per question)")
    # The simple head's export answers with its best span (and
    # answerable_probability): no threshold.
    if ("null_score_diff_threshold" in given and
        self.squad_head != squad_heads.XlnetHead.name):
      raise ValueError("--null_score_diff_threshold applies to the export of "
                       "the SQuAD 2.0 head (task.squad_head=xlnet) only, not "
                       f"to the {self.squad_head} head's (its answers carry "
                       "answerable_probability with the answerability head)")


@registry.register_task
class SquadTask(finetune_lib.FinetuneTask):
  """Span extraction (+ answerability for SQuAD 2.0) with the head of
  `task.squad_head` (squad_heads.HEADS)."""

  name = "question_answering"
  config_cls = SquadExperimentConfig
  serving_params_cls = SquadServingParams
  serving_tasks = {"squad": {}}
  index_key = "unique_ids"
  in_loop_eval = False  # dev windows carry no span labels
  correct_sums = ("start_correct", "end_correct")  # squad_heads._span_sums

  def __init__(self, config, model_dir):
    super().__init__(config, model_dir)
    head = config.task.squad_head
    if head not in squad_heads.HEADS:
      raise ValueError(f"task.squad_head must be one of "
                       f"{sorted(squad_heads.HEADS)}, got {head!r}")
    self.head = squad_heads.HEADS[head]
    self.head.validate(config)
    self.v2 = self.data.version_2_with_negative

  @classmethod
  def model_for(cls, kind, model_config, params, dropout_rate=0.0):
    del kind
    return squad_heads.HEADS[params.squad_head].build_model(
        finetune_lib.encoder(model_config), params, dropout_rate)

  def initialize(self, model):
    self.head.initialize(self, model)

  def feature_spec(self):
    return squad_data.feature_spec(self.data.max_seq_length)

  def split_path(self, split):
    """data.train_file for "train", data.predict_file for other splits."""
    return (self.data.train_file if split == self.train_split
            else self.data.predict_file)

  def read_examples(self, split):
    is_training = split == self.train_split
    self.check_data_files(is_training)
    return squad_data.read_squad_examples(
        self.split_path(split), is_training, self.v2, squad_data.ReadStats())

  def cached_records(self, split, examples=None):
    """Cached windows -> (tfrecord path, metadata with windows/tokens)."""
    is_training, d = split == self.train_split, self.data
    windows = []

    def features(exs):
      for feats, meta in squad_data.convert_examples(
          exs, self.tokenizer, d.max_seq_length, d.doc_stride,
          d.max_query_length, is_training):
        if not is_training:
          windows.append(meta)
        yield feats

    def metadata(exs):  # windows are collected while records are written
      if is_training:
        return {"num_examples": len(exs)}
      return {"num_examples": len(exs), "windows": windows,
              "tokens": squad_data.example_metadata(exs, self.tokenizer)}

    return self.cached_features(
        "squad_" + ("train" if is_training else "eval"), split,
        self.source_files(split), features, examples, metadata,
        doc_stride=d.doc_stride, max_query_length=d.max_query_length,
        v2=self.v2)

  def check_data_files(self, training):
    what = "train_file" if training else "predict_file"
    path = getattr(self.data, what)
    if not path or not os.path.isfile(path):
      raise FileNotFoundError(f"SQuAD data.{what} not found: {path!r} "
                              f"(--{what})")

  def compute_sums(self, model, features, training):
    return self.head.compute_sums(self, model, features, training)

  def prediction_files(self, output_dir):
    """{name: path} of the JSON files evaluation and prediction write;
    refuses (one line) one that is an input file."""
    names = ["predictions", "nbest_predictions"] + (["null_odds"] if self.v2
                                                    else [])
    files = {name: os.path.join(output_dir, f"{name}.json") for name in names}
    output_files.check_not_inputs(
        [("--output_dir", path) for path in files.values()],
        [("--predict_file", self.data.predict_file),
         ("--train_file", self.data.train_file)])
    return files

  def write_predictions(self, output_dir, predictions, nbest, null_odds):
    os.makedirs(output_dir, exist_ok=True)
    values = {"predictions": predictions, "nbest_predictions": nbest,
              "null_odds": null_odds}
    files = self.prediction_files(output_dir)
    for name, path in files.items():
      # The key order of the predictions (the questions') is kept.
      output_files.write_json(path, values[name], sort_keys=False,
                              ensure_ascii=False)
    return list(files.values())

  def evaluate(self, trainer, output_dir):
    self.prediction_files(output_dir)  # before any work
    dataset = squad_checks.load_json(self.data.predict_file)["data"]
    return dict(self.head.evaluate(self, trainer, output_dir, dataset),
                step=int(trainer.global_step.numpy()))

  def predict(self, trainer, output_dir):
    self.prediction_files(output_dir)
    return self.head.predict_answers(self, trainer, output_dir)[2]

  # --- Export ---

  @classmethod
  def module_for(cls, params):
    return squad_heads.HEADS[params.squad_head].module_for(params)
