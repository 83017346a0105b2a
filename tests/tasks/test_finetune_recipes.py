"""Every recipe in albert_tf/configs/finetuning/ loads over a model preset
and carries the original release's hyperparameters for it (v2 models unless
the file is a `_v1` variant)."""

import os

import pytest

from albert_tf.core import experiment_config
from albert_tf.modeling import albert_config
from albert_tf.tasks import multiple_choice
from albert_tf.tasks import question_answering
from albert_tf.tasks import sentence_prediction
from albert_tf.tasks import tagging

FINETUNING_DIR = os.path.join(albert_config.CONFIG_DIR, "finetuning")

# name: (LR, batch, train steps, warm-up steps, max seq length, ALBERT
# dropout, classifier dropout). Paper appendix table "Hyperparameters for
# downstream tasks", which the README says the v2 models reuse except RACE
# (LR 1e-5, ALBERT dropout 0: the v1 setting diverges on v2); SQuAD's max
# sequence length is run_squad_v*.py's default / the README's command (384).
RECIPES = {
    "glue_cola": (1e-5, 16, 5336, 320, 512, 0.0, 0.1),
    "glue_sts-b": (2e-5, 16, 3598, 214, 512, 0.0, 0.1),
    "glue_sst-2": (1e-5, 32, 20935, 1256, 512, 0.0, 0.1),
    "glue_mnli": (3e-5, 128, 10000, 1000, 512, 0.0, 0.1),
    "glue_qnli": (1e-5, 32, 33112, 1986, 512, 0.0, 0.1),
    "glue_qqp": (5e-5, 128, 14000, 1000, 512, 0.1, 0.1),
    "glue_rte": (3e-5, 32, 800, 200, 512, 0.1, 0.1),
    "glue_mrpc": (2e-5, 32, 800, 200, 512, 0.0, 0.1),
    "glue_wnli": (2e-5, 16, 2000, 250, 512, 0.1, 0.1),
    "squad_v1.1": (5e-5, 48, 3649, 365, 384, 0.0, 0.1),
    "squad_v2.0": (3e-5, 48, 8144, 814, 384, 0.0, 0.1),
    "race": (1e-5, 32, 12000, 1000, 512, 0.0, 0.1),
    "race_v1": (2e-5, 32, 12000, 1000, 512, 0.1, 0.1),
    # No ALBERT NER recipe was published: BERT's appendix A.3 grid (lr 5e-5,
    # batch 32, 3 epochs of CoNLL-2003's 14,041 sentences = 3 x 439 steps,
    # 10% warm-up, max seq 128).
    "conll2003": (5e-5, 32, 1317, 132, 128, 0.0, 0.1),
}


CONFIG_CLASSES = {"glue": sentence_prediction.GlueExperimentConfig,
                  "squad": question_answering.SquadExperimentConfig,
                  "race": multiple_choice.RaceExperimentConfig,
                  "conll2003": tagging.TaggingExperimentConfig}


def _load(name, preset="albert_base_v2"):
  return experiment_config.load_experiment_config(
      CONFIG_CLASSES[name.split("_")[0]],
      [os.path.join(albert_config.PRESET_DIR, f"{preset}.yaml"),
       os.path.join(FINETUNING_DIR, f"{name}.yaml")])


def test_every_recipe_is_in_the_table():
  names = {n[:-len(".yaml")]
           for n in os.listdir(FINETUNING_DIR)}
  assert names == set(RECIPES)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_matches_the_original(name):
  preset = "albert_base_v1" if name.endswith("_v1") else "albert_base_v2"
  config = _load(name, preset)
  got = (config.optimizer.learning_rate, config.data.global_batch_size,
         config.trainer.train_steps, config.optimizer.num_warmup_steps,
         config.data.max_seq_length, config.model.hidden_dropout_prob,
         config.task.classifier_dropout)
  assert got == pytest.approx(RECIPES[name])
  assert (config.model.attention_probs_dropout_prob ==
          config.model.hidden_dropout_prob)
  assert config.model.hidden_size == 768  # the preset is kept


def test_squad_recipes_use_the_originals_heads_and_decoding():
  v2 = _load("squad_v2.0")
  assert (v2.task.squad_head, v2.task.start_n_top, v2.task.end_n_top,
          v2.task.with_answerability) == ("xlnet", 5, 5, False)
  for config in (v2, _load("squad_v1.1")):
    d = config.data
    assert (d.doc_stride, d.max_query_length, d.n_best_size,
            d.max_answer_length) == (128, 64, 20, 30)
  assert _load("squad_v1.1").task.squad_head == "simple"


def test_the_ner_recipe_configures_a_tagging_run(tmp_path):
  """Named as a user names it (`--config_file=finetuning/conll2003.yaml`),
  the recipe configures a tagging task; the metric it keeps the best
  checkpoint by is one the tagging evaluation reports in the loop."""
  config = experiment_config.load_experiment_config(
      tagging.TaggingExperimentConfig,
      ["models/albert_base_v2.yaml", "finetuning/conll2003.yaml"],
      flag_values={"data": {"data_dir": str(tmp_path)}})
  task = tagging.TaggingTask(config, str(tmp_path / "run"))
  assert (task.data.max_seq_length, task.data.global_batch_size) == (128, 32)
  assert config.optimizer.learning_rate == 5e-5
  sums = {"loss_sum": 2.0, "count": 4.0, "correct": 3.0}
  metrics = task.metrics_from_sums(sums)
  assert float(metrics[config.trainer.best_metric]) == 0.75
